package osdmap

import (
	"errors"
	"testing"
	"unsafe"

	"github.com/purerbd/purerbd/internal/alloctest"
	"github.com/purerbd/purerbd/rados/denc"
)

// noChange is an incremental for epoch that changes nothing.
func noChange(epoch uint32) *Incremental {
	return &Incremental{
		Epoch: epoch, NewPoolMax: -1, NewFlags: -1, NewMaxOSD: -1,
		NewNearfullRatio: -1, NewFullRatio: -1, NewBackfillfullRatio: -1,
		NewRequireMinCompatClient: 0xff, NewRequireOSDRelease: 0xff,
	}
}

// TestPoolSnapsCountAllocation: a pg_pool_t before version 3 lists its
// snap and removed-snap counts before the entries, and the counts were
// checked against one byte per entry; a map of snaps sized from that
// allocated far more than the input held (issue 22, item 5).
func TestPoolSnapsCountAllocation(t *testing.T) {
	const snaps = 100000
	e := denc.NewEncoder(nil)
	e.U8(2) // version 2: no compat byte, no length
	e.U8(1) // type
	e.U8(3) // size
	e.U8(0) // crush_rule
	e.U8(0) // object_hash
	for range 5 {
		e.U32(8) // pg_num, pgp_num, lpg_num, lpgp_num, last_change
	}
	e.U64(0) // snap_seq
	e.U32(0) // snap_epoch
	e.U32(snaps)
	e.U32(0) // removed_snaps
	e.U64(0) // auid
	e.Raw(make([]byte, snaps))
	b := e.Bytes()
	var err error
	got := alloctest.Measure(len(b), func() { _, err = DecodePool(b) })
	if err == nil {
		t.Fatal("a pool announcing more snaps than its bytes hold decoded")
	}
	if got > alloctest.Limit(len(b)) {
		t.Fatalf("decoding %d bytes allocated %d bytes (limit %d)", len(b), got, alloctest.Limit(len(b)))
	}
}

// TestAddressCountAllocation: old_blocklist and old_range_blocklist
// counts were checked against one byte per address, and lists of address
// vectors against one byte per vector, far below their smallest encodings.
func TestAddressCountAllocation(t *testing.T) {
	const count = 100000
	withCount := func(prefix []byte) []byte {
		e := denc.NewEncoder(append([]byte(nil), prefix...))
		e.U32(count)
		e.Raw(make([]byte, count))
		return e.Bytes()
	}
	// The osd part of an incremental (version 11) up to old_blocklist:
	// five empty maps, then the count.
	blocklist := withCount(make([]byte, 5*4))
	addrvecs := withCount(nil)
	for name, c := range map[string]struct {
		b      []byte
		decode func(d *denc.Decoder)
	}{
		"old_blocklist": {blocklist, func(d *denc.Decoder) { new(Incremental).decodeOSD(d, 11) }},
		"osd addrs":     {addrvecs, func(d *denc.Decoder) { decodeAddrVecs(d, "client_addrs") }},
	} {
		var err error
		got := alloctest.Measure(len(c.b), func() {
			d := denc.NewDecoder(c.b)
			c.decode(d)
			err = d.Err()
		})
		if err == nil {
			t.Errorf("%s: %d entries in %d bytes decoded", name, count, len(c.b))
		}
		if got > alloctest.Limit(len(c.b)) {
			t.Errorf("%s: decoding %d bytes allocated %d bytes (limit %d)", name, len(c.b), got, alloctest.Limit(len(c.b)))
		}
	}
}

// TestNewMaxOSDBound: new_max_osd is a value, four bytes of an
// incremental; it used to size every per-OSD vector up to 2^20 OSDs
// (hundreds of MiB). Beyond maxOSDGrowth an incremental is refused.
func TestNewMaxOSDBound(t *testing.T) {
	base := &OSDMap{Epoch: 1}
	inc := noChange(2)
	inc.NewMaxOSD = maxOSDLimit
	var err error
	got := alloctest.Measure(4, func() { _, err = base.Apply(inc) })
	if !errors.Is(err, ErrBadIncremental) {
		t.Fatalf("max_osd %d from an empty map: err %v, want ErrBadIncremental", inc.NewMaxOSD, err)
	}
	if got > alloctest.Limit(4) {
		t.Fatalf("refusing max_osd %d allocated %d bytes", inc.NewMaxOSD, got)
	}
	inc.NewMaxOSD = maxOSDGrowth
	n, err := base.Apply(inc)
	if err != nil || n.MaxOSD != maxOSDGrowth || len(n.OSDState) != maxOSDGrowth {
		t.Fatalf("max_osd %d: %v", maxOSDGrowth, err)
	}
	// A map already that large may keep its size.
	inc = noChange(3)
	inc.NewMaxOSD = maxOSDGrowth
	if _, err := n.Apply(inc); err != nil {
		t.Fatalf("keeping max_osd %d: %v", maxOSDGrowth, err)
	}
}

// TestApplyCopiesOnlyWhatChanges: Apply copied every per-OSD vector of
// the map for every incremental, O(max_osd) work and memory per epoch;
// an incremental that reweights one OSD now copies the weights alone,
// and the map it applies to is left as it was.
func TestApplyCopiesOnlyWhatChanges(t *testing.T) {
	grow := noChange(2)
	grow.NewMaxOSD = maxOSDGrowth
	base, err := (&OSDMap{Epoch: 1}).Apply(grow)
	if err != nil {
		t.Fatal(err)
	}
	inc := noChange(3)
	inc.NewWeight = map[int32]uint32{7: WeightIn}
	var n *OSDMap
	got := alloctest.Measure(0, func() { n, err = base.Apply(inc) })
	if err != nil {
		t.Fatal(err)
	}
	// The weights and states (marking an OSD in sets its exists bit) and
	// the extended infos (its old weight is cleared) are copied.
	want := uint64(maxOSDGrowth) * (4 + 4 + uint64(unsafe.Sizeof(OSDXInfo{})))
	if got > want+alloctest.Slack {
		t.Fatalf("reweighting one OSD of %d allocated %d bytes, want at most %d", maxOSDGrowth, got, want+alloctest.Slack)
	}
	if n.Weight(7) != WeightIn || !n.Exists(7) || base.Weight(7) != WeightOut || base.Exists(7) {
		t.Fatalf("osd.7: new map weight %#x exists %v, old map weight %#x exists %v",
			n.Weight(7), n.Exists(7), base.Weight(7), base.Exists(7))
	}
	if &n.OSDInfo[0] != &base.OSDInfo[0] || &n.OSDUUID[0] != &base.OSDUUID[0] {
		t.Fatal("vectors the incremental does not change were copied")
	}
}
