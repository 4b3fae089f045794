package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/purerbd/purerbd/rados/radostest"
)

// TestRBDChildrenAgainstRbd compares rbd children with Ceph's on one
// cluster: clone v1 (Pacific's default here) and v2 children, in two
// pools and a namespace, a grandchild and a great-grandchild
// (--descendants), a child in the trash (--all), every snapshot of an
// image (no @SNAP), plain and JSON output, and the missing snapshot and
// image.
func TestRBDChildrenAgainstRbd(t *testing.T) {
	c := radostest.New(t, radostest.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	v2 := "--rbd-default-clone-format=2"
	mustCeph(t, ctx, c, "osd", "pool", "create", "p2", "8")
	for _, args := range [][]string{
		{"pool", "init", "p2"},
		{"namespace", "create", "rbd/ns1"},
		{"create", "--size", "4M", "rbd/par"},
		{"snap", "create", "rbd/par@s"},
		{"snap", "protect", "rbd/par@s"},
		{"snap", "create", "rbd/par@lonely"},
		{"clone", "rbd/par@s", "rbd/zc"},
		{"clone", "rbd/par@s", "rbd/ac"},
		{"clone", "rbd/par@s", "p2/bc"},
		{"clone", v2, "rbd/par@s", "rbd/ns1/nc"},
		{"clone", v2, "rbd/par@s", "p2/v2c"},
		{"snap", "create", "rbd/ac@t"},
		{"clone", v2, "rbd/ac@t", "rbd/gc"},
		{"snap", "create", "rbd/gc@u"},
		{"clone", v2, "rbd/gc@u", "p2/ggc"},
		{"trash", "mv", "rbd/zc"},
		{"create", "--size", "1M", "rbd/tp"},
		{"snap", "create", "rbd/tp@s"},
		{"clone", v2, "rbd/tp@s", "rbd/tpc"},
		{"trash", "mv", "rbd/tp"},
	} {
		mustRbd(t, ctx, c, args...)
	}
	for _, args := range [][]string{
		{"children", "rbd/par@s"},
		{"children", "--format", "json", "rbd/par@s"},
		{"children", "--format", "json", "--pretty-format", "rbd/par@s"},
		{"children", "-a", "rbd/par@s"},
		{"children", "--all", "--format", "json", "rbd/par@s"},
		{"children", "--descendants", "rbd/par@s"},
		{"children", "--descendants", "--all", "--format", "json", "rbd/par@s"},
		{"children", "rbd/par@lonely"},
		{"children", "--format", "json", "rbd/par@lonely"},
		{"children", "rbd/par"},
		{"children", "--descendants", "rbd/ac"},
		{"-p", "p2", "children", "--descendants", "rbd/gc@u"},
		{"children", "rbd/par@nosuch"},
		{"children", "rbd/nosuch@s"},
	} {
		sameAsRbd(t, ctx, c, args...)
	}
	for _, image := range []string{"rbd/ac", "p2/bc", "rbd/ns1/nc", "rbd/gc", "p2/ggc", "rbd/tpc"} {
		sameParentAsRbd(t, ctx, c, image)
	}
	// the oracle saw every kind of child
	out := mustRbd(t, ctx, c, "children", "--descendants", "--all", "rbd/par@s")
	for _, want := range []string{"p2/bc\n", "p2/v2c\n", "p2/ggc\n", "rbd/ns1/nc\n", "rbd/zc (trash "} {
		if !strings.Contains(out, want) {
			t.Errorf("rbd children lacks %q:\n%s", want, out)
		}
	}
}

// sameParentAsRbd compares what rbd info says of image's parent, as
// JSON and as text, with Ceph's rbd info (the rest of info's output has
// its own test).
func sameParentAsRbd(t *testing.T, ctx context.Context, c *radostest.Cluster, image string) {
	t.Helper()
	parentJSON := func(out string) string {
		var info struct {
			Parent json.RawMessage `json:"parent"`
		}
		if err := json.Unmarshal([]byte(out), &info); err != nil || info.Parent == nil {
			t.Fatalf("rbd info %s: %v in %q", image, err, out)
		}
		return string(info.Parent)
	}
	parentLines := func(out string) string {
		var keep []string
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(l, "\tparent: ") || strings.HasPrefix(l, "\toverlap: ") {
				keep = append(keep, l)
			}
		}
		return strings.Join(keep, "\n")
	}
	for _, args := range [][]string{{"info", "--format", "json", image}, {"info", image}} {
		want := mustRbd(t, ctx, c, args...)
		got := pureRbd(ctx, c, nil, args...)
		if got.code != 0 {
			t.Errorf("purerbd rbd %s: exit %d: %s", strings.Join(args, " "), got.code, got.stderr)
			continue
		}
		g, w := parentLines(got.stdout), parentLines(want)
		if len(args) == 4 {
			g, w = parentJSON(got.stdout), parentJSON(want)
		}
		if g != w || w == "" {
			t.Errorf("rbd %s: parent:\n purerbd %s\n rbd     %s", strings.Join(args, " "), g, w)
		}
	}
}
