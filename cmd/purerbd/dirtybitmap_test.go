package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/purerbd/purerbd/rados/radostest"
)

// mergeRanges joins adjacent (offset, length) ranges.
func mergeRanges(in [][2]int64) [][2]int64 {
	var out [][2]int64
	for _, r := range in {
		if n := len(out); n > 0 && out[n-1][0]+out[n-1][1] == r[0] {
			out[n-1][1] += r[1]
		} else {
			out = append(out, r)
		}
	}
	return out
}

// TestDirtyBitmapsAgainstRbdDiff serves snapshots of an image librbd
// wrote (rbd bench between snapshots, a discard) with purerbd nbd serve
// and reads their qemu:dirty-bitmap: contexts with nbdinfo and qemu-img:
// the dirty ranges are those of Ceph's rbd diff --from-snap; an export
// lists a bitmap for each earlier snapshot (the head: every snapshot).
func TestDirtyBitmapsAgainstRbdDiff(t *testing.T) {
	radostest.SkipShort(t)
	bin := buildBinary(t)
	c := radostest.New(t, radostest.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	rbd := func(args ...string) string {
		t.Helper()
		out, err := c.Rbd(ctx, args...)
		if err != nil {
			t.Fatalf("rbd %v: %v: %s", args, err, out)
		}
		return string(out)
	}
	bench := func() {
		rbd("bench", "--io-type", "write", "--io-size", "4K", "--io-total", "512K", "--io-pattern", "rand", "--rbd-cache=false", "rbd/cbt")
	}
	rbd("create", "--size", "64M", "rbd/cbt")
	bench()
	rbd("snap", "create", "rbd/cbt@s1")
	bench()
	rbd("snap", "create", "rbd/cbt@s2")
	bench()
	dir := t.TempDir()
	for _, tc := range []struct {
		export, bitmap string
		bitmaps        []string
		diffArgs       []string
	}{
		{"rbd/cbt@s2", "s1", []string{"s1"}, []string{"--from-snap", "s1", "rbd/cbt@s2"}},
		{"rbd/cbt", "s2", []string{"s1", "s2"}, []string{"--from-snap", "s2", "rbd/cbt"}},
	} {
		socket := filepath.Join(dir, tc.bitmap+".sock")
		_, stderr := startServeBinary(t, bin, c.Conf, filepath.Join(dir, "run-"+tc.bitmap), "--image", tc.export, "--read-only", "--socket", socket)
		waitSocket(t, socket, 60*time.Second)
		uri := "nbd+unix:///?socket=" + socket

		var info struct {
			Exports []struct {
				Contexts []string `json:"contexts"`
			} `json:"exports"`
		}
		if err := json.Unmarshal([]byte(runTool(t, "nbdinfo", "--json", uri)), &info); err != nil || len(info.Exports) != 1 {
			t.Fatalf("nbdinfo --json: %v", err)
		}
		want := []string{"base:allocation"}
		for _, b := range tc.bitmaps {
			want = append(want, "qemu:dirty-bitmap:"+b)
		}
		if got := info.Exports[0].Contexts; !slices.Equal(got, want) {
			t.Errorf("%s: contexts %v, want %v", tc.export, got, want)
		}

		var diff []struct {
			Offset int64 `json:"offset"`
			Length int64 `json:"length"`
		}
		if err := json.Unmarshal([]byte(rbd(append([]string{"diff", "--format", "json"}, tc.diffArgs...)...)), &diff); err != nil {
			t.Fatal(err)
		}
		var wantDirty [][2]int64
		for _, d := range diff {
			wantDirty = append(wantDirty, [2]int64{d.Offset, d.Length})
		}
		wantDirty = mergeRanges(wantDirty)
		if len(wantDirty) == 0 {
			t.Fatalf("%s: rbd diff %v lists nothing", tc.export, tc.diffArgs)
		}

		var extents []struct {
			Offset int64 `json:"offset"`
			Length int64 `json:"length"`
			Type   int   `json:"type"`
		}
		if err := json.Unmarshal([]byte(runTool(t, "nbdinfo", "--map=qemu:dirty-bitmap:"+tc.bitmap, "--json", uri)), &extents); err != nil {
			t.Fatal(err)
		}
		var gotDirty [][2]int64
		for _, e := range extents {
			if e.Type&1 != 0 {
				gotDirty = append(gotDirty, [2]int64{e.Offset, e.Length})
			}
		}
		if !slices.Equal(mergeRanges(gotDirty), wantDirty) {
			t.Errorf("%s: nbdinfo's dirty ranges since %s differ from rbd diff %v:\n%v\n%v\n%s", tc.export, tc.bitmap, tc.diffArgs, gotDirty, wantDirty, stderr.String())
		}

		// qemu's client reports a dirty range as a hole (data false)
		var qm []struct {
			Start  int64 `json:"start"`
			Length int64 `json:"length"`
			Data   bool  `json:"data"`
		}
		out := runTool(t, "qemu-img", "map", "--output=json", "--image-opts",
			"driver=nbd,server.type=unix,server.path="+socket+",x-dirty-bitmap=qemu:dirty-bitmap:"+tc.bitmap)
		if err := json.Unmarshal([]byte(out), &qm); err != nil {
			t.Fatal(err)
		}
		var qemuDirty [][2]int64
		for _, e := range qm {
			if !e.Data {
				qemuDirty = append(qemuDirty, [2]int64{e.Start, e.Length})
			}
		}
		if !slices.Equal(mergeRanges(qemuDirty), wantDirty) {
			t.Errorf("%s: qemu-img map's dirty ranges since %s differ from rbd diff", tc.export, tc.bitmap)
		}
		t.Logf("%s since %s: %d dirty ranges, %d bytes, as rbd diff lists them", tc.export, tc.bitmap, len(wantDirty), sumRanges(wantDirty))
	}
}

func sumRanges(r [][2]int64) int64 {
	var n int64
	for _, x := range r {
		n += x[1]
	}
	return n
}
