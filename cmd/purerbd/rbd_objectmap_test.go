package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/purerbd/purerbd/rados/radostest"
)

// TestRBDObjectMapAgainstRbd breaks the object map of two twin images
// (with data, a snapshot and fast-diff) the same way, writing a data
// object behind librbd's back and removing another, and repairs one with
// Ceph's rbd and the other with purerbd: object-map check must exit as
// rbd's does and flag the map invalid where rbd's check does, rebuild
// must clear the flags, leave byte-identical object maps (head and
// snapshot), pass the other tool's check, and give the same rbd diff
// and du. A head map removed altogether is found and rebuilt alike.
func TestRBDObjectMapAgainstRbd(t *testing.T) {
	c := radostest.New(t, radostest.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	twins := [2]string{"rbd/ra", "rbd/pa"}
	ids := [2]string{}
	for i, img := range twins {
		mustRbd(t, ctx, c, "create", "--size", "8M", "--object-size", "1M", img)
		librbdIO(t, ctx, c, img, "write -P 1 0 1M", "write -P 2 3M 512K")
		mustRbd(t, ctx, c, "snap", "create", img+"@s")
		librbdIO(t, ctx, c, img, "write -P 3 3M 4K", "write -P 4 5M 1M")
		ids[i] = imageID(t, ctx, c, img)
	}
	for _, args := range [][]string{
		{"object-map", "check", "--no-progress", "IMG"},
		{"object-map", "check", "--no-progress", "IMG@s"},
		{"object-map", "check", "--no-progress", "rbd/nosuch"},
		{"object-map", "rebuild", "--no-progress", "rbd/nosuch"},
		{"object-map", "check", "--no-progress", "IMG@nosuch"},
	} {
		sameOnTwins(t, ctx, c, withImage(args, twins[0]), withImage(args, twins[1]))
	}
	if got, want := imageFlags(t, ctx, c, twins[1]), imageFlags(t, ctx, c, twins[0]); got != want || want != "[]" {
		t.Fatalf("flags after checking a sound map: purerbd's image %s, rbd's %s", got, want)
	}

	// an object the map does not know of (invalid), an object the map
	// still claims (only inconsistent)
	for _, id := range ids {
		mustRadosIn(t, ctx, c, strings.NewReader("stray"), "-p", "rbd", "put", dataObject(id, 7), "-")
		mustRados(t, ctx, c, "-p", "rbd", "rm", dataObject(id, 5))
	}
	sameOnTwins(t, ctx, c, []string{"object-map", "check", "--no-progress", twins[0]},
		[]string{"object-map", "check", "--no-progress", twins[1]})
	if got, want := imageFlags(t, ctx, c, twins[1]), imageFlags(t, ctx, c, twins[0]); got != want || want == "[]" {
		t.Fatalf("flags after checking a broken map: purerbd's image %s, rbd's %s", got, want)
	}
	for _, args := range [][]string{
		{"object-map", "rebuild", "--no-progress", "IMG"},
		{"object-map", "rebuild", "--no-progress", "IMG@s"},
	} {
		sameOnTwins(t, ctx, c, withImage(args, twins[0]), withImage(args, twins[1]))
	}
	if got, want := imageFlags(t, ctx, c, twins[1]), imageFlags(t, ctx, c, twins[0]); got != want || want != "[]" {
		t.Fatalf("flags after rebuild: purerbd's image %s, rbd's %s", got, want)
	}
	snapID := snapIDOf(t, ctx, c, twins[0], "s")
	for _, suffix := range []string{"", fmt.Sprintf(".%016x", snapIDOf(t, ctx, c, twins[1], "s"))} {
		rs := ""
		if suffix != "" {
			rs = fmt.Sprintf(".%016x", snapID)
		}
		want := radosGet(t, ctx, c, "rbd_object_map."+ids[0]+rs)
		got := radosGet(t, ctx, c, "rbd_object_map."+ids[1]+suffix)
		if got != want {
			t.Errorf("object map%s after rebuild: purerbd's %x, rbd's %x", suffix, got, want)
		}
	}
	// each tool's check passes the other's rebuild
	for i, img := range twins {
		args := []string{"object-map", "check", "--no-progress", img}
		var r cmdResult
		if i == 0 {
			r = pureRbd(ctx, c, nil, args...)
		} else {
			r = cephRbd(t, ctx, c, nil, args...)
		}
		if r.code != 0 || imageFlags(t, ctx, c, img) != "[]" {
			t.Errorf("check of %s after the other tool's rebuild: exit %d %s, flags %s", img, r.code, r.stderr, imageFlags(t, ctx, c, img))
		}
	}
	norm := [2]*strings.Replacer{}
	for i, img := range twins {
		norm[i] = strings.NewReplacer(`"`+strings.TrimPrefix(img, "rbd/")+`"`, "NAME", ids[i], "ID",
			fmt.Sprintf(`"snapshot_id":%d`, snapIDOf(t, ctx, c, img, "s")), `"snapshot_id":N`)
	}
	for _, args := range [][]string{
		{"diff", "--format", "json", "IMG"},
		{"diff", "--format", "json", "--from-snap", "s", "IMG"},
		{"du", "--format", "json", "IMG"},
	} {
		want := norm[0].Replace(mustRbd(t, ctx, c, withImage(args, twins[0])...))
		got := norm[1].Replace(mustRbd(t, ctx, c, withImage(args, twins[1])...))
		if got != want {
			t.Errorf("rbd %s after rebuild: purerbd's image %s, rbd's %s", strings.Join(args, " "), got, want)
		}
	}

	// a head map removed behind librbd's back
	for _, id := range ids {
		mustRados(t, ctx, c, "-p", "rbd", "rm", "rbd_object_map."+id)
	}
	for _, args := range [][]string{
		{"object-map", "check", "--no-progress", "IMG"},
		{"object-map", "rebuild", "--no-progress", "IMG"},
	} {
		sameOnTwins(t, ctx, c, withImage(args, twins[0]), withImage(args, twins[1]))
		if got, want := imageFlags(t, ctx, c, twins[1]), imageFlags(t, ctx, c, twins[0]); got != want {
			t.Errorf("flags after rbd %s of a removed map: purerbd's image %s, rbd's %s", strings.Join(args, " "), got, want)
		}
	}
	if got, want := radosGet(t, ctx, c, "rbd_object_map."+ids[1]), radosGet(t, ctx, c, "rbd_object_map."+ids[0]); got != want {
		t.Errorf("object map rebuilt from nothing: purerbd's %x, rbd's %x", got, want)
	}

	// an image without an object map
	mustRbd(t, ctx, c, "create", "--size", "1M", "--image-feature", "layering", "rbd/plain")
	sameAsRbd(t, ctx, c, "object-map", "check", "--no-progress", "rbd/plain")
	sameAsRbd(t, ctx, c, "object-map", "rebuild", "--no-progress", "rbd/plain")
}

// imageID is the id of image (rbd info's "id").
func imageID(t *testing.T, ctx context.Context, c *radostest.Cluster, image string) string {
	t.Helper()
	var info struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal([]byte(mustRbd(t, ctx, c, "info", "--format", "json", image)), &info); err != nil {
		t.Fatal(err)
	}
	return info.ID
}

// imageFlags is rbd info's flags of image, sorted.
func imageFlags(t *testing.T, ctx context.Context, c *radostest.Cluster, image string) string {
	t.Helper()
	var info struct {
		Flags []string `json:"flags"`
	}
	if err := json.Unmarshal([]byte(mustRbd(t, ctx, c, "info", "--format", "json", image)), &info); err != nil {
		t.Fatal(err)
	}
	slices.Sort(info.Flags)
	return fmt.Sprint(info.Flags)
}

// snapIDOf is the id of image's snapshot name.
func snapIDOf(t *testing.T, ctx context.Context, c *radostest.Cluster, image, name string) uint64 {
	t.Helper()
	var snaps []struct {
		ID   uint64 `json:"id"`
		Name string `json:"name"`
	}
	if err := json.Unmarshal([]byte(mustRbd(t, ctx, c, "snap", "ls", "--format", "json", image)), &snaps); err != nil {
		t.Fatal(err)
	}
	for _, s := range snaps {
		if s.Name == name {
			return s.ID
		}
	}
	t.Fatalf("%s has no snapshot %s", image, name)
	return 0
}

// dataObject is the name of data object objno of the image with id.
func dataObject(id string, objno uint64) string {
	return fmt.Sprintf("rbd_data.%s.%016x", id, objno)
}

// radosGet is the content of object oid of pool rbd.
func radosGet(t *testing.T, ctx context.Context, c *radostest.Cluster, oid string) string {
	t.Helper()
	return mustRados(t, ctx, c, "-p", "rbd", "get", oid, "-")
}

// mustRadosIn runs Ceph's rados with stdin and fails the test if it
// fails.
func mustRadosIn(t *testing.T, ctx context.Context, c *radostest.Cluster, stdin *strings.Reader, args ...string) {
	t.Helper()
	var out strings.Builder
	if r := runCephTool(t, ctx, c, "rados", stdin, &out, args...); r.code != 0 {
		t.Fatalf("rados %s: exit %d: %s", strings.Join(args, " "), r.code, r.stderr)
	}
}
