package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/purerbd/purerbd/rados/radostest"
)

func TestParseSpec(t *testing.T) {
	c := &rbdCommand{pool: "rbd"}
	for in, want := range map[string]imageSpec{
		"img":          {pool: "rbd", name: "img"},
		"p/img":        {pool: "p", name: "img"},
		"p/ns/img@s":   {pool: "p", ns: "ns", name: "img", snap: "s"},
		"img@snap":     {pool: "rbd", name: "img", snap: "snap"},
		"pool/img@s@x": {pool: "pool", name: "img", snap: "s@x"},
	} {
		got, err := c.parseSpec(in, false)
		if err != nil || got != want {
			t.Errorf("parseSpec(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "/img", "a/b/c/d", "p/"} {
		if _, err := c.parseSpec(bad, false); err == nil {
			t.Errorf("parseSpec(%q) accepted", bad)
		}
	}
	if _, err := c.parseSpec("img", true); err == nil {
		t.Error("snapshot required but not given")
	}
}

func TestRBDUsage(t *testing.T) {
	var out, errb bytes.Buffer
	if err := runRBD(context.Background(), []string{"help"}, &out, &errb); err != nil {
		t.Fatal(err)
	}
	// the usage goes to stdout, as rbd help prints it
	if !strings.Contains(out.String(), "import") {
		t.Error("usage lacks verbs")
	}
	if err := runRBD(context.Background(), []string{"bogus"}, &out, &errb); err == nil {
		t.Error("unknown verb accepted")
	}
	if err := runRBD(context.Background(), []string{"create", "img"}, &out, &errb); err == nil {
		t.Error("create without --size accepted")
	}
}

// TestRBDVerbsAgainstRbd runs purerbd rbd's verbs on a real cluster and
// compares with Ceph's rbd CLI.
func TestRBDVerbsAgainstRbd(t *testing.T) {
	c := radostest.New(t, radostest.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	run := func(args ...string) string {
		t.Helper()
		var out, errb bytes.Buffer
		if err := runRBD(ctx, append([]string{"-c", c.Conf}, args...), &out, &errb); err != nil {
			t.Fatalf("purerbd rbd %s: %v\n%s", strings.Join(args, " "), err, errb.String())
		}
		return out.String()
	}
	rbdOut := func(args ...string) string {
		t.Helper()
		out, err := c.Rbd(ctx, args...)
		if err != nil {
			t.Fatal(err)
		}
		return string(out)
	}
	run("create", "--size", "10M", "--object-size", "1M", "--image-feature", "layering,exclusive-lock,object-map", "one")
	var mine, theirs map[string]any
	if err := json.Unmarshal([]byte(run("info", "--format", "json", "one")), &mine); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(rbdOut("info", "--format", "json", "rbd/one")), &theirs); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"name", "id", "size", "objects", "order", "object_size", "snapshot_count",
		"block_name_prefix", "format", "features", "op_features", "flags"} {
		if fmt.Sprint(mine[k]) != fmt.Sprint(theirs[k]) {
			t.Errorf("info %s: purerbd %v, rbd %v", k, mine[k], theirs[k])
		}
	}
	if got, want := run("ls"), rbdOut("ls"); got != want {
		t.Errorf("ls: purerbd %q, rbd %q", got, want)
	}

	dir := t.TempDir()
	data := make([]byte, 5<<20+333)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range data {
		data[i] = byte(r.Uint32())
	}
	in := filepath.Join(dir, "in")
	if err := os.WriteFile(in, data, 0o600); err != nil {
		t.Fatal(err)
	}
	run("import", "--object-size", "1M", in, "imp")
	rbdOut("export", "rbd/imp", filepath.Join(dir, "by-rbd"))
	if b, _ := os.ReadFile(filepath.Join(dir, "by-rbd")); !bytes.Equal(b, data) {
		t.Error("rbd export of purerbd import differs")
	}
	rbdOut("import", in, "rbd/imp2")
	run("export", "imp2", filepath.Join(dir, "by-purerbd"))
	if b, _ := os.ReadFile(filepath.Join(dir, "by-purerbd")); !bytes.Equal(b, data) {
		t.Error("purerbd export of rbd import differs")
	}
	run("resize", "--size", "20M", "one")
	if !strings.Contains(rbdOut("info", "rbd/one"), "size 20 MiB") {
		t.Error("resize not seen by rbd")
	}
	for _, typ := range []string{"write", "read", "readwrite"} {
		if !strings.Contains(run("bench", "--io-type", typ, "--io-total", "1M", "one"), "ops/sec") {
			t.Errorf("bench --io-type %s output", typ)
		}
	}
	// 4M reads go into buffers of their own mappings (hugebuf)
	if out := run("bench", "--io-type", "read", "--io-size", "4M", "--io-threads", "4", "--io-total", "32M", "one"); !strings.Contains(out, "ops: 8 ") {
		t.Errorf("bench 4M reads: %q", out)
	}
	rbdOut("object-map", "check", "rbd/one")
	rbdOut("snap", "create", "rbd/one@s")
	if !strings.Contains(run("snap", "ls", "one"), " s ") {
		t.Error("snap ls lacks s")
	}
	rbdOut("snap", "rm", "rbd/one@s")
	run("rm", "one")
	if strings.Contains(rbdOut("ls"), "one") {
		t.Error("rm")
	}
}

// TestRBDRepeatedImageFeature: --image-feature given several times
// accumulates, as rbd's does (it kept only the last), and every feature
// reaches the image: rbd info is the oracle.
func TestRBDRepeatedImageFeature(t *testing.T) {
	c := radostest.New(t, radostest.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	features := func(image string) []string {
		t.Helper()
		out, err := c.Rbd(ctx, "info", "--format", "json", "rbd/"+image)
		if err != nil {
			t.Fatal(err)
		}
		var info struct {
			Features []string `json:"features"`
		}
		if err := json.Unmarshal(out, &info); err != nil {
			t.Fatal(err)
		}
		sort.Strings(info.Features)
		return info.Features
	}
	in := filepath.Join(t.TempDir(), "in")
	if err := os.WriteFile(in, bytes.Repeat([]byte{7}, 1<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"create", "--size", "10M", "--image-feature", "layering", "--image-feature", "exclusive-lock",
			"--image_feature=object-map,fast-diff", "feat"}, []string{"exclusive-lock", "fast-diff", "layering", "object-map"}},
		{[]string{"create", "--size", "10M", "--image-feature", "layering", "--image-feature", "deep-flatten", "feat2"},
			[]string{"deep-flatten", "layering"}},
		{[]string{"import", "--image-feature", "layering", in, "--image-feature", "exclusive-lock", "feat3"},
			[]string{"exclusive-lock", "layering"}},
	} {
		var out, errb bytes.Buffer
		if err := runRBD(ctx, append([]string{"-c", c.Conf}, tc.args...), &out, &errb); err != nil {
			t.Fatalf("purerbd rbd %s: %v\n%s", strings.Join(tc.args, " "), err, errb.String())
		}
		image := tc.args[len(tc.args)-1]
		if got := features(image); strings.Join(got, ",") != strings.Join(tc.want, ",") {
			t.Errorf("purerbd rbd %s: rbd info shows features %q, want %q", strings.Join(tc.args, " "), got, tc.want)
		}
	}
}
