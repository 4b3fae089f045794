package main

import (
	"bytes"
	"path/filepath"
	"strconv"
	"testing"
)

// liveOSDMap is a map captured from a live 16.2.15 cluster with pg_temp,
// primary_temp, pg_upmap, pg_upmap_items, primary affinity, reweighted,
// out and down OSDs and an erasure-coded pool (see its README).
func liveOSDMap(name string) string {
	return filepath.Join("..", "..", "rados", "osdmap", "testdata", "live-16.2.15", name)
}

func TestOSDMapTestMapPGsDumpMatchesOsdmaptool(t *testing.T) {
	for _, name := range []string{"full.89.bin", "up.89.bin", "full.50.bin"} {
		path := liveOSDMap(name)
		sameOutput(t, name, purerbd(t, "osdmap", "test-map-pgs-dump", path),
			cephTool(t, "osdmaptool", path, "--test-map-pgs-dump"))
		for _, pool := range []string{"2", "4"} {
			sameOutput(t, name+" pool "+pool, purerbd(t, "osdmap", "test-map-pgs-dump", path, "--pool", pool),
				cephTool(t, "osdmaptool", path, "--test-map-pgs-dump", "--pool", pool))
		}
	}
	// A map osdmaptool made itself, with every OSD up and one out.
	dir := t.TempDir()
	p := filepath.Join(dir, "osdmap")
	cephTool(t, "osdmaptool", "--createsimple", "7", "--with-default-pool", "--pg-bits", "5", p)
	cephTool(t, "osdmaptool", p, "--mark-up-in", "--mark-out", "2", "--adjust-crush-weight", "1:3.5,4:0.25", "--save")
	sameOutput(t, "createsimple", purerbd(t, "osdmap", "test-map-pgs-dump", p),
		cephTool(t, "osdmaptool", p, "--test-map-pgs-dump"))
}

func TestOSDMapTestMapObjectMatchesOsdmaptool(t *testing.T) {
	path := liveOSDMap("up.89.bin")
	for pool := 1; pool <= 6; pool++ {
		for _, name := range []string{"foo", "rbd_header.10226b8b4567", "rbd_data.10226b8b4567.0000000000000a2f"} {
			ps := strconv.Itoa(pool)
			sameOutput(t, name+" pool "+ps, purerbd(t, "osdmap", "test-map-object", path, "--pool", ps, name),
				cephTool(t, "osdmaptool", path, "--test-map-object", name, "--pool", ps))
		}
	}
}

func TestOSDMapRejectsMissingPool(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run(t.Context(), []string{"osdmap", "test-map-object", liveOSDMap("full.89.bin"), "--pool", "99", "foo"},
		&out, &errb); code == 0 {
		t.Fatal("mapping into a missing pool succeeded")
	}
}
