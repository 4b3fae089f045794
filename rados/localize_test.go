package rados

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/purerbd/purerbd/rados/radostest"
)

// TestLocalizedReads: three OSDs in three CRUSH hosts, a pool of size
// 3. A client placed at host hB (Config.CrushLocation) reads through
// WithLocalizedReads: every read goes to osd.1, the OSD under hB, also
// for the objects whose primary is another OSD, as the OSDs' own op
// counters (`ceph tell osd.N perf dump`, op_r) show; without the option
// the primaries serve them. The CRUSH locations the choice rests on are
// checked against `ceph osd find`.
func TestLocalizedReads(t *testing.T) {
	c := radostest.New(t, radostest.Options{OSDs: 3, Pool: "-", WithMgr: true})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	ceph := func(args ...string) []byte {
		t.Helper()
		out, err := c.Ceph(ctx, args...)
		if err != nil {
			t.Fatalf("ceph %v: %v\n%s", args, err, out)
		}
		return out
	}
	if err := c.PlaceOSDsInHosts(ctx, "hA", "hB", "hC"); err != nil {
		t.Fatal(err)
	}
	ceph("osd", "pool", "create", "loc", "32", "32", "replicated")
	ceph("osd", "pool", "set", "loc", "size", "3")
	ceph("osd", "pool", "application", "enable", "loc", "rbd")
	if err := c.WaitClean(ctx); err != nil {
		t.Fatal(err)
	}

	conn, err := Connect(ctx, Config{MonHost: c.MonHost(), Key: c.AdminKey, CrushLocation: map[string]string{"host": "hB"}})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.WaitForLatestOSDMap(ctx); err != nil {
		t.Fatal(err)
	}
	// the locations the objecter computes are Ceph's
	cm := conn.OSDMap().Crush
	for i := range 3 {
		var found struct {
			Loc map[string]string `json:"crush_location"`
		}
		if err := json.Unmarshal(ceph("osd", "find", fmt.Sprint(i), "--format", "json"), &found); err != nil {
			t.Fatal(err)
		}
		if got := cm.FullLocation(int32(i)); !maps.Equal(got, found.Loc) {
			t.Fatalf("osd.%d: location %v, ceph osd find says %v", i, got, found.Loc)
		}
	}
	if d, ok := cm.CommonAncestorDistance(1, map[string]string{"host": "hB"}); !ok || d != 1 {
		t.Fatalf("osd.1 from host hB: distance %d %v, want 1 (host)", d, ok)
	}
	if d, ok := cm.CommonAncestorDistance(0, map[string]string{"host": "hB", "root": "default"}); !ok || cm.Types[d] != "root" {
		t.Fatalf("osd.0 from host hB in root default: distance %d %v, want the root's type", d, ok)
	}

	io, err := conn.IOContext(ctx, "loc", "")
	if err != nil {
		t.Fatal(err)
	}
	const n = 60
	otherPrimary := 0
	for i := range n {
		oid := fmt.Sprintf("obj-%d", i)
		if err := io.WriteFull(ctx, oid, []byte(oid)); err != nil {
			t.Fatal(err)
		}
		l, err := io.Locate(oid)
		if err != nil {
			t.Fatal(err)
		}
		if l.ActingPrimary != 1 {
			otherPrimary++
		}
	}
	if otherPrimary == 0 {
		t.Fatal("osd.1 is the primary of every object: the test proves nothing")
	}
	// A replica serves an object only once it knows every replica has
	// the object's last write on disk (Ceph's min_last_complete_ondisk,
	// which the next write of the placement group brings it); before,
	// it answers EAGAIN and the read goes to the primary. A later write
	// in every placement group makes the objects readable anywhere.
	for round := range 2 {
		pgs := map[uint32]bool{}
		for i := 0; len(pgs) < 32 && i < 5000; i++ {
			oid := fmt.Sprintf("filler-%d-%d", round, i)
			l, err := io.Locate(oid)
			if err != nil {
				t.Fatal(err)
			}
			if pgs[l.PG.Seed] {
				continue
			}
			pgs[l.PG.Seed] = true
			if err := io.WriteFull(ctx, oid, []byte("x")); err != nil {
				t.Fatal(err)
			}
		}
	}
	readAll := func(io *IOContext) [3]int64 {
		before, eagain := opReads(ctx, t, c), conn.Stats().OSD.EAGAIN
		buf := make([]byte, 64)
		for i := range n {
			oid := fmt.Sprintf("obj-%d", i)
			got, err := io.Read(ctx, oid, buf, 0)
			if err != nil || string(buf[:got]) != oid {
				t.Fatalf("read %s: %q %v", oid, buf[:got], err)
			}
		}
		after := opReads(ctx, t, c)
		t.Logf("EAGAIN replies: %d", conn.Stats().OSD.EAGAIN-eagain)
		var d [3]int64
		for i := range d {
			d[i] = after[i] - before[i]
		}
		return d
	}
	local := readAll(io.WithLocalizedReads())
	t.Logf("localized: op_r deltas %v (%d of %d objects have another primary)", local, otherPrimary, n)
	if local[1] < n || local[0]+local[2] > 0 {
		t.Errorf("localized reads: op_r deltas osd.0..2 = %v, want all %d on osd.1", local, n)
	}
	// objects just written: a replica that cannot serve them yet
	// answers EAGAIN, and the read goes to the primary at once
	lio := io.WithLocalizedReads()
	eagain := conn.Stats().OSD.EAGAIN
	for i := range 20 {
		oid := fmt.Sprintf("fresh-%d", i)
		if err := io.WriteFull(ctx, oid, []byte(oid)); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 64)
		got, err := lio.Read(ctx, oid, buf, 0)
		if err != nil || string(buf[:got]) != oid {
			t.Fatalf("read %s right after writing it: %q %v", oid, buf[:got], err)
		}
	}
	if d := conn.Stats().OSD.EAGAIN - eagain; d == 0 {
		t.Errorf("no replica refused an object read right after its write: the fallback to the primary went untested")
	} else {
		t.Logf("fresh objects: %d replica reads refused (EAGAIN) and served by the primary", d)
	}
	primary := readAll(io)
	t.Logf("primary: op_r deltas %v", primary)
	if primary[0]+primary[2] < int64(otherPrimary) {
		t.Errorf("reads without the option: op_r deltas %v, want %d on osd.0 and osd.2 (their primaries)", primary, otherPrimary)
	}
}

// opReads are the OSDs' op_r counters.
func opReads(ctx context.Context, t *testing.T, c *radostest.Cluster) []int64 {
	t.Helper()
	r, err := c.OSDOpReads(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return r
}
