package cls

import (
	"bytes"
	"encoding/hex"
	"testing"

	"github.com/purerbd/purerbd/rados/denc"
)

// Encodings Ceph 16.2 wrote on a cluster: the record of group snapshot
// s1 of a group with two images (omap value snapshot_<id> of
// rbd_group_header.<id>) and an image's rbd_group_ref.
const (
	cephGroupSnap = "0101670000000c000000313032393662386234353637020000007331010200000001012000000001000000000000000c0000" +
		"00313031376234356434613565040000000000000001012000000001000000000000000c0000003130313936356330326165320500000000000000"
	cephGroupRef = "01011800000001000000000000000c000000313030663662386234353637"
)

func TestGroupRecords(t *testing.T) {
	b := unhex(t, cephGroupSnap)
	s, err := denc.Unmarshal[GroupSnapshot](b)
	if err != nil {
		t.Fatal(err)
	}
	want := GroupSnapshot{ID: "10296b8b4567", Name: "s1", State: GroupSnapComplete, Version: 1, Snaps: []ImageSnapshotSpec{
		{PoolID: 1, ImageID: "1017b45d4a5e", SnapID: 4}, {PoolID: 1, ImageID: "101965c02ae2", SnapID: 5}}}
	if s.ID != want.ID || s.Name != want.Name || s.State != want.State || len(s.Snaps) != 2 ||
		s.Snaps[0] != want.Snaps[0] || s.Snaps[1] != want.Snaps[1] {
		t.Errorf("group snapshot: %+v", s)
	}
	if got := denc.Marshal(want); !bytes.Equal(got, b) {
		t.Errorf("group snapshot encodes as\n% x\nwant\n% x", got, b)
	}
	g, err := DecodeImageGroupGet(unhex(t, cephGroupRef))
	if err != nil || g != (GroupSpec{PoolID: 1, GroupID: "100f6b8b4567"}) || !g.Valid() {
		t.Errorf("group ref: %+v %v", g, err)
	}
	// a newer record (version 2, a group snapshot namespace after the
	// image snapshots) keeps what follows when written back
	v2 := GroupSnapshot{ID: "a", Name: "n", Version: 2, Tail: []byte{0, 0, 0, 0}}
	back, err := denc.Unmarshal[GroupSnapshot](denc.Marshal(v2))
	if err != nil || back.Version != 2 || !bytes.Equal(back.Tail, v2.Tail) {
		t.Errorf("version 2 record: %+v %v", back, err)
	}
}

func TestGroupMethodInputs(t *testing.T) {
	for _, c := range []struct {
		m  Method
		in string
	}{
		{GroupDirAdd("g1", "100f6b8b4567"), "0200000067310c000000313030663662386234353637"},
		{GroupImageSet(GroupImageStatus{Spec: GroupImageSpec{ImageID: "ab", PoolID: 1}, State: GroupImageIncomplete}),
			"010115000000" + "01010e000000" + "020000006162" + "0100000000000000" + "01"},
		{ImageGroupAdd(GroupSpec{PoolID: 1, GroupID: "100f6b8b4567"}), cephGroupRef},
		{GroupImageList(GroupImageListStart, 1024), "01010c000000" + "00000000" + "ffffffffffffffff" + "0004000000000000"},
		{GroupSnapRemove("x"), "0100000078"},
	} {
		if got := hex.EncodeToString(c.m.In); got != c.in {
			t.Errorf("%s input %s, want %s", c.m, got, c.in)
		}
	}
}
