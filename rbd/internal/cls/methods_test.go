package cls

import (
	"bytes"
	"encoding/hex"
	"errors"
	"net/netip"
	"testing"

	"github.com/purerbd/purerbd/rados/denc"
)

func unhex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestMethodInputs pins the input encodings of the methods purerbd sends,
// byte for byte, as cls_rbd_client.cc and cls_lock_client.cc build them.
func TestMethodInputs(t *testing.T) {
	cases := []struct {
		m     Method
		class string
		name  string
		in    string
	}{
		{Create(1<<30, 22, 61, "rbd_data.abc", -1), "rbd", "create",
			"0000004000000000" + "16" + "3d00000000000000" + "0c000000" + hex.EncodeToString([]byte("rbd_data.abc")) + "ffffffffffffffff"},
		{GetSize(NoSnap), "rbd", "get_size", "feffffffffffffff"},
		{NamespaceAdd("ns"), "rbd", "namespace_add", "020000006e73"},
		{NamespaceList("", 1024), "rbd", "namespace_list", "000000000004000000000000"},
		{DirStateSet(DirectoryAddDisabled), "rbd", "dir_state_set", "01"},
		{TrashList("", 1024), "rbd", "trash_list", "000000000004000000000000"},
		{GetFeatures(NoSnap, true), "rbd", "get_features", "feffffffffffffff01"},
		{SetSize(4096), "rbd", "set_size", "0010000000000000"},
		{SnapshotAdd(4, "s1", UserNamespace), "rbd", "snapshot_add",
			"02000000" + "7331" + "0400000000000000" + "0101040000000000000000"[:20]},
		{DirAddImage("img", "id1"), "rbd", "dir_add_image", "03000000696d6703000000696431"},
		{DirList("", 1024), "rbd", "dir_list", "000000000004000000000000"},
		{SetFlags(NoSnap, 1, 3), "rbd", "set_flags", "0100000000000000" + "0300000000000000" + "feffffffffffffff"},
		{ObjectMapUpdate(2, 5, 1, nil), "rbd", "object_map_update", "0200000000000000" + "0500000000000000" + "01" + "00"},
		{ObjectMapResize(10, 0), "rbd", "object_map_resize", "0a0000000000000000"},
		{MetadataSet(map[string][]byte{"b": []byte("2"), "a": []byte("1")}), "rbd", "metadata_set",
			"02000000" + "0100000061" + "0100000031" + "0100000062" + "0100000032"},
		{ChildAttach(7, ChildImageSpec{PoolID: 1, ImageID: "c"}), "rbd", "child_attach",
			"0700000000000000" + "0201" + "11000000" + "0100000000000000" + "0100000063" + "00000000"},
		{Lock("rbd_lock", LockExclusive, "auto 1", "internal", "", denc.UTime{}, 0), "lock", "lock",
			"0101" + "30000000" + "08000000" + hex.EncodeToString([]byte("rbd_lock")) + "01" +
				"06000000" + hex.EncodeToString([]byte("auto 1")) + "08000000" + hex.EncodeToString([]byte("internal")) +
				"00000000" + "0000000000000000" + "00"},
		{Unlock("rbd_lock", "auto 1"), "lock", "unlock",
			"0101" + "16000000" + "08000000" + hex.EncodeToString([]byte("rbd_lock")) + "06000000" + hex.EncodeToString([]byte("auto 1"))},
		{BreakLock("rbd_lock", denc.EntityName{Type: denc.EntityTypeClient, Num: 4123}, "auto 1"), "lock", "break_lock",
			"0101" + "1f000000" + "08000000" + hex.EncodeToString([]byte("rbd_lock")) + "08" + "1b10000000000000" +
				"06000000" + hex.EncodeToString([]byte("auto 1"))},
	}
	for _, c := range cases {
		if c.m.Class != c.class || c.m.Name != c.name {
			t.Errorf("%s: want %s.%s", c.m, c.class, c.name)
		}
		if want := unhex(t, c.in); !bytes.Equal(c.m.In, want) {
			t.Errorf("%s input\n got % x\nwant % x", c.m, c.m.In, want)
		}
	}
}

func TestReplies(t *testing.T) {
	size, order, err := DecodeGetSize(unhex(t, "16"+"0000004000000000"))
	if err != nil || size != 1<<30 || order != 22 {
		t.Errorf("get_size: %d %d %v", size, order, err)
	}
	if _, _, err := DecodeGetSize(unhex(t, "16")); !errors.Is(err, ErrBadReply) {
		t.Errorf("short get_size: %v", err)
	}
	if _, _, err := DecodeGetSize(unhex(t, "16000000400000000000")); !errors.Is(err, ErrBadReply) {
		t.Errorf("long get_size: %v", err)
	}
	sc, err := DecodeGetSnapContext(unhex(t, "0500000000000000"+"02000000"+"0500000000000000"+"0300000000000000"))
	if err != nil || sc.Seq != 5 || len(sc.Snaps) != 2 || sc.Snaps[0] != 5 {
		t.Errorf("snapcontext: %+v %v", sc, err)
	}
	if _, err := DecodeGetSnapContext(unhex(t, "0500000000000000"+"02000000"+"0300000000000000"+"0500000000000000")); err == nil {
		t.Error("unsorted snap context accepted")
	}
	entries, err := DecodeDirList(unhex(t, "02000000"+"0100000062"+"0100000032"+"0100000061"+"0100000031"))
	if err != nil || len(entries) != 2 || entries[0] != (DirEntry{"a", "1"}) {
		t.Errorf("dir_list: %v %v", entries, err)
	}
	ov, err := DecodeParentOverlapGet(unhex(t, "01"+"0010000000000000"))
	if err != nil || ov == nil || *ov != 4096 {
		t.Errorf("parent_overlap_get: %v %v", ov, err)
	}
	ov, err = DecodeParentOverlapGet([]byte{0})
	if err != nil || ov != nil {
		t.Errorf("parent_overlap_get none: %v %v", ov, err)
	}
}

func TestLockInfoRoundTrip(t *testing.T) {
	info := LockInfo{
		Lockers: []Locker{{
			Entity: denc.EntityName{Type: denc.EntityTypeClient, Num: 4567},
			Cookie: "auto 94294", Description: "",
			Addr: denc.NewEntityAddr(denc.AddrAny, netip.MustParseAddrPort("127.0.0.1:0"), 123456),
		}},
		Type: LockExclusive,
		Tag:  "internal",
	}
	b := denc.Marshal(info)
	got, err := DecodeGetInfo(b)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(denc.Marshal(got), b) || got.Lockers[0].Cookie != "auto 94294" || got.Tag != "internal" {
		t.Errorf("round trip: %+v", got)
	}
}

// TestTrashListReply decodes a trash_list reply holding one image, its
// spec as cls_rbd_types.cc encodes it (version 2, with the state).
func TestTrashListReply(t *testing.T) {
	spec := "0201" + "18000000" + "00" + "02000000" + hex.EncodeToString([]byte("zc")) +
		"0a000000" + "14000000" + "0b000000" + "00000000" + "00"
	out := unhex(t, "01000000"+"03000000"+hex.EncodeToString([]byte("abc"))+spec)
	entries, err := DecodeTrashList(out)
	if err != nil {
		t.Fatal(err)
	}
	want := TrashEntry{ID: "abc", Spec: TrashImageSpec{Source: TrashSourceUser, Name: "zc",
		DeletionTime: denc.UTime{Sec: 10, Nsec: 20}, DefermentEndTime: denc.UTime{Sec: 11}}}
	if len(entries) != 1 || entries[0] != want {
		t.Fatalf("DecodeTrashList = %+v, want %+v", entries, want)
	}
	e := denc.NewEncoder(nil)
	want.Spec.Encode(e)
	if got := hex.EncodeToString(e.Bytes()); got != spec {
		t.Errorf("TrashImageSpec encodes as %s, want %s", got, spec)
	}
	if _, err := DecodeTrashList(out[:len(out)-1]); !errors.Is(err, ErrBadReply) {
		t.Errorf("a truncated reply: %v", err)
	}
}
