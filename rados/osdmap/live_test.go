package osdmap

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"testing"

	"github.com/purerbd/purerbd/rados/radostest/corpus"
)

// liveDir holds maps captured from a live Ceph 16.2.15 cluster (see its
// README): full maps of epochs 12..16, their `ceph osd dump` JSON, and the
// incrementals between them.
func liveDir(t *testing.T) string {
	return filepath.Join(corpus.ModuleRoot(t), "testdata", "cluster-16.2.15")
}

func readMap(t testing.TB, path string) *OSDMap {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	m, err := Decode(raw)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return m
}

func readJSON(t *testing.T, path string) map[string]any {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var d map[string]any
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return d
}

func TestDecodeLiveCaptures(t *testing.T) {
	dir := liveDir(t)
	pairs := map[string]string{"osdmap.bin": "osdmap.json"}
	for n := 12; n <= 15; n++ {
		pairs["osdmap."+strconv.Itoa(n)+".bin"] = "osdmap." + strconv.Itoa(n) + ".json"
	}
	for bin, js := range pairs {
		m := readMap(t, filepath.Join(dir, bin))
		for _, diff := range compareMapWithDump(m, readJSON(t, filepath.Join(dir, js))) {
			t.Errorf("%s: %s", bin, diff)
		}
	}
}

// normalize makes maps decoded and maps built by Apply comparable: nil
// and empty containers mean the same, and the crc and encoding versions
// describe bytes, not content.
func normalize(m *OSDMap) *OSDMap {
	n := m.clone()
	n.CRC, n.CRCDefined, n.ClientVersion, n.OSDVersion = 0, false, 0, 0
	n.NewRemovedSnaps = cloneMap(n.NewRemovedSnaps)
	n.NewPurgedSnaps = cloneMap(n.NewPurgedSnaps)
	for id, p := range n.Pools {
		cp := *p
		cp.Version = 0
		n.Pools[id] = &cp
	}
	return n
}

func TestApplyLiveIncrementals(t *testing.T) {
	dir := liveDir(t)
	cur := readMap(t, filepath.Join(dir, "osdmap.12.bin"))
	for n := 13; n <= 16; n++ {
		raw, err := os.ReadFile(filepath.Join(dir, "osdmap-inc."+strconv.Itoa(n)+".bin"))
		if err != nil {
			t.Fatal(err)
		}
		inc, err := DecodeIncremental(raw)
		if err != nil {
			t.Fatalf("incremental %d: %v", n, err)
		}
		if !inc.HaveCRC || inc.Epoch != uint32(n) {
			t.Fatalf("incremental %d: epoch %d, crc %v", n, inc.Epoch, inc.HaveCRC)
		}
		next, err := cur.Apply(inc)
		if err != nil {
			t.Fatalf("apply %d: %v", n, err)
		}
		wantFile := "osdmap." + strconv.Itoa(n) + ".bin"
		if n == 16 {
			wantFile = "osdmap.bin"
		}
		want := readMap(t, filepath.Join(dir, wantFile))
		for _, diff := range mapDiff(normalize(next), normalize(want)) {
			t.Errorf("epoch %d: applied map differs from the full map: %s", n, diff)
		}
		if cur.Epoch != uint32(n-1) {
			t.Fatalf("Apply modified its receiver (epoch %d)", cur.Epoch)
		}
		cur = next
	}
}

func TestApplyGap(t *testing.T) {
	dir := liveDir(t)
	m := readMap(t, filepath.Join(dir, "osdmap.12.bin"))
	raw, err := os.ReadFile(filepath.Join(dir, "osdmap-inc.14.bin"))
	if err != nil {
		t.Fatal(err)
	}
	inc, err := DecodeIncremental(raw)
	if err != nil {
		t.Fatal(err)
	}
	_, err = m.Apply(inc)
	var gap *GapError
	if !errors.As(err, &gap) || gap.Have != 12 || gap.Got != 14 {
		t.Fatalf("applying 14 to 12: %v, want a GapError", err)
	}
	inc.FSID[0] ^= 1
	if _, err := m.Apply(inc); !errors.Is(err, ErrFSIDMismatch) {
		t.Fatalf("foreign fsid: %v", err)
	}
}

func TestDecodeRejectsBadCRC(t *testing.T) {
	dir := liveDir(t)
	for _, f := range []string{"osdmap.bin", "osdmap-inc.15.bin"} {
		raw, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		bad := append([]byte(nil), raw...)
		bad[len(bad)/2] ^= 0x40
		var derr error
		if f == "osdmap.bin" {
			_, derr = Decode(bad)
		} else {
			_, derr = DecodeIncremental(bad)
		}
		if derr == nil {
			t.Errorf("%s with a flipped bit decoded", f)
		}
	}
}

// mapDiff names the fields in which two maps differ.
func mapDiff(a, b *OSDMap) []string {
	var diffs []string
	va, vb := reflect.ValueOf(a).Elem(), reflect.ValueOf(b).Elem()
	for i := 0; i < va.NumField(); i++ {
		f := va.Type().Field(i)
		if f.Name == "Pools" {
			continue
		}
		if !reflect.DeepEqual(va.Field(i).Interface(), vb.Field(i).Interface()) {
			diffs = append(diffs, fmt.Sprintf("%s: %+v != %+v", f.Name, va.Field(i).Interface(), vb.Field(i).Interface()))
		}
	}
	for id := range a.Pools {
		if b.Pools[id] == nil || !reflect.DeepEqual(*a.Pools[id], *b.Pools[id]) {
			diffs = append(diffs, fmt.Sprintf("pool %d: %+v != %+v", id, a.Pools[id], b.Pools[id]))
		}
	}
	for id := range b.Pools {
		if a.Pools[id] == nil {
			diffs = append(diffs, fmt.Sprintf("pool %d missing", id))
		}
	}
	return diffs
}
