package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/purerbd/purerbd/rados/radostest"
)

// TestRBDFeatureAgainstRbd turns features off and on with Ceph's rbd on
// one image and purerbd on its twin (both with data and a snapshot):
// exit statuses, rbd info's features and flags, and the object map
// objects left must agree at every step, the refusals included
// (immutable features, already on or off, exclusive-lock before
// object-map, an unknown name).
func TestRBDFeatureAgainstRbd(t *testing.T) {
	c := radostest.New(t, radostest.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	twins := [2]string{"rbd/ra", "rbd/pa"}
	for _, img := range twins {
		mustRbd(t, ctx, c, "create", "--size", "8M", img)
		librbdIO(t, ctx, c, img, "write -P 1 0 1M")
		mustRbd(t, ctx, c, "snap", "create", img+"@s")
	}
	for _, args := range [][]string{
		{"feature", "disable", "IMG", "exclusive-lock"}, // object-map first
		{"feature", "disable", "IMG", "fast-diff"},      // takes object-map along
		{"feature", "disable", "IMG", "fast-diff"},      // already off
		{"feature", "enable", "IMG", "fast-diff"},       // brings object-map, both invalid
		{"object-map", "rebuild", "--no-progress", "IMG"},
		{"feature", "disable", "IMG", "object-map"},
		{"feature", "disable", "IMG", "layering"},
		{"feature", "enable", "IMG", "deep-flatten"},
		{"feature", "disable", "IMG", "deep-flatten"},
		{"feature", "disable", "IMG", "exclusive-lock"},
		{"feature", "disable", "IMG", "bogus"},
		{"feature", "enable", "IMG", "exclusive-lock"},
		{"feature", "enable", "IMG", "exclusive-lock", "object-map"},
		{"feature", "enable", "rbd/nosuch", "exclusive-lock"},
	} {
		if args[0] == "object-map" {
			for _, img := range twins {
				mustRbd(t, ctx, c, withImage(args, img)...)
			}
		} else {
			sameOnTwins(t, ctx, c, withImage(args, twins[0]), withImage(args, twins[1]))
		}
		if got, want := featureState(t, ctx, c, twins[1]), featureState(t, ctx, c, twins[0]); got != want {
			t.Errorf("after rbd %s: purerbd's image %s\nrbd's %s", strings.Join(args, " "), got, want)
		}
	}
}

// featureState is an image's features and flags, and which object map
// objects it has (head, snapshots).
func featureState(t *testing.T, ctx context.Context, c *radostest.Cluster, image string) string {
	t.Helper()
	var info struct {
		ID       string   `json:"id"`
		Features []string `json:"features"`
		Flags    []string `json:"flags"`
	}
	if err := json.Unmarshal([]byte(mustRbd(t, ctx, c, "info", "--format", "json", image)), &info); err != nil {
		t.Fatal(err)
	}
	var maps []string
	for _, o := range strings.Fields(mustRados(t, ctx, c, "-p", "rbd", "ls")) {
		if rest, ok := strings.CutPrefix(o, "rbd_object_map."+info.ID); ok {
			maps = append(maps, "map"+rest)
		}
	}
	return fmt.Sprint(info.Features, info.Flags, len(maps))
}
