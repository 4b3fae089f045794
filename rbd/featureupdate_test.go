package rbd

import (
	"errors"
	"strings"
	"testing"
)

// TestUpdateFeatures turns object-map (fast-diff with it) and
// exclusive-lock off and on through an open image; rbd info is the
// oracle, and librbd's object-map rebuild and check accept the maps
// purerbd created.
func TestUpdateFeatures(t *testing.T) {
	ctx := ctxT(t)
	name := imageName(t)
	spec := "rbd/" + name
	rbdCLI(t, "create", "--size", "8M", spec)
	rbdCLI(t, "snap", "create", spec+"@s")
	features := func() string {
		t.Helper()
		return strings.Join(infoStrings(rbdInfo(t, spec)["features"]), ",")
	}
	img := openT(t, name, OpenOptions{})
	if _, err := img.WriteAtContext(ctx, []byte("data"), 0); err != nil {
		t.Fatal(err)
	}
	if err := img.DisableFeatures(ctx, FeatureExclusiveLock); !errors.Is(err, ErrInvalid) {
		t.Errorf("exclusive-lock off under object-map: %v", err)
	}
	if err := img.DisableFeatures(ctx, FeatureObjectMap); err != nil {
		t.Fatal(err)
	}
	if got := features(); got != "layering,exclusive-lock,deep-flatten" {
		t.Errorf("after object-map off: %s", got)
	}
	if err := img.DisableFeatures(ctx, FeatureExclusiveLock|FeatureDeepFlatten); err != nil {
		t.Fatal(err)
	}
	if err := img.DisableFeatures(ctx, FeatureLayering); !errors.Is(err, ErrInvalid) {
		t.Errorf("layering off: %v", err)
	}
	if got := features(); got != "layering" {
		t.Errorf("after exclusive-lock off: %s", got)
	}
	if err := img.EnableFeatures(ctx, FeatureExclusiveLock); err != nil {
		t.Fatal(err)
	}
	img2 := openT(t, name, OpenOptions{})
	if err := img2.EnableFeatures(ctx, FeatureObjectMap); err != nil {
		t.Fatal(err)
	}
	if got := features(); got != "layering,exclusive-lock,object-map,fast-diff" {
		t.Errorf("after object-map on: %s", got)
	}
	rbdCLI(t, "object-map", "rebuild", "--no-progress", spec)
	rbdCLI(t, "object-map", "check", "--no-progress", spec)
	rbdCLI(t, "object-map", "check", "--no-progress", spec+"@s")
}

// infoStrings is a JSON list of strings from rbd info.
func infoStrings(v any) []string {
	var out []string
	l, _ := v.([]any)
	for _, s := range l {
		str, _ := s.(string)
		out = append(out, str)
	}
	return out
}
