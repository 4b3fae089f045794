package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/purerbd/purerbd/rados/radostest"
)

// TestRBDSparsifyAgainstRbd sparsifies twin images with Ceph's rbd and
// with purerbd: data objects holding zeroed runs, zeroed tails and
// nothing but zeros, written behind the images' backs with the rados
// tool, in an image without object map and in one with it (whose map
// still says the objects exist). Afterwards the objects' sizes, rbd
// diff, the data, and rbd object-map check must agree.
func TestRBDSparsifyAgainstRbd(t *testing.T) {
	c := radostest.New(t, radostest.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir := t.TempDir()
	object := func(name string, parts ...[2]int) string {
		var b []byte
		for _, p := range parts {
			b = append(b, bytes.Repeat([]byte{byte(p[0])}, p[1])...)
		}
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	objs := []string{
		object("o0", [2]int{1, 4096}, [2]int{0, 12288}, [2]int{2, 5000}, [2]int{0, 1<<20 - 4096 - 12288 - 5000}),
		object("o1", [2]int{0, 1 << 20}),
		object("o2", [2]int{3, 100}, [2]int{0, 300000}),
		object("o3", [2]int{0, 8192}, [2]int{4, 8192}, [2]int{0, 4096}, [2]int{5, 1}),
	}
	twins := map[string][2]string{
		"plain": {"rbd/cplain", "rbd/pplain"},
		"omap":  {"rbd/comap", "rbd/pomap"},
	}
	for kind, pair := range twins {
		for _, img := range pair {
			args := []string{"create", "--size", "6M", "--object-size", "1M", img}
			if kind == "plain" {
				args = append(args, "--image-feature", "layering")
			}
			mustRbd(t, ctx, c, args...)
			librbdIO(t, ctx, c, img, "write -P 9 0 4M")
			prefix := blockPrefix(t, ctx, c, img)
			for i, o := range objs {
				mustRados(t, ctx, c, "-p", "rbd", "put", prefix+".000000000000000"+string(rune('0'+i)), o)
			}
		}
		sameOnTwins(t, ctx, c, []string{"sparsify", "--no-progress", pair[0]}, []string{"sparsify", "--no-progress", pair[1]})
		for i := range objs {
			got := objectStat(t, ctx, c, blockPrefix(t, ctx, c, pair[1])+".000000000000000"+string(rune('0'+i)))
			want := objectStat(t, ctx, c, blockPrefix(t, ctx, c, pair[0])+".000000000000000"+string(rune('0'+i)))
			if got != want {
				t.Errorf("%s object %d after sparsify: purerbd's %s, rbd's %s", kind, i, got, want)
			}
		}
		for _, args := range [][]string{{"diff"}, {"diff", "--whole-object"}} {
			if got, want := mustRbd(t, ctx, c, append(args, pair[1])...), mustRbd(t, ctx, c, append(args, pair[0])...); got != want {
				t.Errorf("%s: rbd %s after sparsify: purerbd's\n%s\nrbd's\n%s", kind, strings.Join(args, " "), got, want)
			}
		}
		if !bytes.Equal(exportOf(t, ctx, c, pair[1]), exportOf(t, ctx, c, pair[0])) {
			t.Errorf("%s: the data differ after sparsify", kind)
		}
		if kind == "omap" {
			mustRbd(t, ctx, c, "object-map", "check", pair[1])
		}
	}
	sameAsRbd(t, ctx, c, "sparsify", "--no-progress", "rbd/nosuch")
	sameAsRbd(t, ctx, c, "sparsify", "--sparse-size", "1000", "rbd/pplain")
}

// blockPrefix is an image's block_name_prefix.
func blockPrefix(t *testing.T, ctx context.Context, c *radostest.Cluster, image string) string {
	t.Helper()
	for _, l := range strings.Split(mustRbd(t, ctx, c, "info", image), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), "block_name_prefix: "); ok {
			return v
		}
	}
	t.Fatalf("rbd info %s: no block_name_prefix", image)
	return ""
}

// objectStat is the size of an object of pool rbd, or "absent".
func objectStat(t *testing.T, ctx context.Context, c *radostest.Cluster, oid string) string {
	t.Helper()
	var out strings.Builder
	if r := runCephTool(t, ctx, c, "rados", nil, &out, "-p", "rbd", "stat", oid); r.code != 0 {
		return "absent"
	}
	s := out.String()
	return s[strings.LastIndex(s, "size"):]
}
