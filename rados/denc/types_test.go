package denc

import (
	"testing"
	"time"
)

func TestEntityNames(t *testing.T) {
	n, err := ParseEntityName("client.4123")
	if err != nil || n != (EntityName{EntityTypeClient, 4123}) || n.String() != "client.4123" {
		t.Errorf("ParseEntityName = %v, %v", n, err)
	}
	if s := (EntityName{EntityTypeOSD, EntityNameNew}).String(); s != "osd.?" {
		t.Errorf("new name prints %q", s)
	}
	for _, bad := range []string{"client", "foo.1", "client.x", "auth.1"} {
		if _, err := ParseEntityName(bad); err == nil {
			t.Errorf("ParseEntityName(%q) succeeded", bad)
		}
	}
	a, err := ParseAuthName("client.admin")
	if err != nil || a != (AuthName{EntityTypeClient, "admin"}) || a.String() != "client.admin" {
		t.Errorf("ParseAuthName = %v, %v", a, err)
	}
	if a, err := ParseAuthName("mon."); err != nil || a.ID != "" || a.Type != EntityTypeMon {
		t.Errorf("ParseAuthName(mon.) = %v, %v", a, err)
	}
	if _, err := ParseAuthName("admin"); err == nil {
		t.Error("ParseAuthName(admin) succeeded")
	}
	b := Marshal(AuthName{EntityTypeClient, "admin"})
	if want := "\x08\x00\x00\x00\x05\x00\x00\x00admin"; string(b) != want {
		t.Errorf("AuthName encoding % x", b)
	}
}

func TestUTime(t *testing.T) {
	tm := time.Date(2024, 5, 6, 7, 8, 9, 123456789, time.UTC)
	u := UTimeOf(tm)
	if !u.Time().Equal(tm) {
		t.Errorf("Time() = %v", u.Time())
	}
	if s := u.String(); s != "2024-05-06T07:08:09.123456+0000" {
		t.Errorf("String() = %q", s)
	}
	back, err := Unmarshal[UTime](Marshal(u))
	if err != nil || back != u {
		t.Errorf("round trip %v, %v", back, err)
	}
}

func TestUUID(t *testing.T) {
	const s = "0b5cd5b4-8b1f-4d0a-9a3e-1f2e3d4c5b6a"
	u, err := ParseUUID(s)
	if err != nil || u.String() != s {
		t.Fatalf("ParseUUID = %v, %v", u, err)
	}
	if u[0] != 0x0b || u[15] != 0x6a {
		t.Errorf("byte order %x", u)
	}
	for _, bad := range []string{"", "0b5cd5b4-8b1f-4d0a-9a3e-1f2e3d4c5b6", "0b5cd5b4x8b1f-4d0a-9a3e-1f2e3d4c5b6a", "zb5cd5b4-8b1f-4d0a-9a3e-1f2e3d4c5b6a"} {
		if _, err := ParseUUID(bad); err == nil {
			t.Errorf("ParseUUID(%q) succeeded", bad)
		}
	}
}

func TestPG(t *testing.T) {
	p, err := ParsePG("2.1f")
	if err != nil || p != (PG{2, 0x1f}) || p.String() != "2.1f" {
		t.Errorf("ParsePG = %v, %v", p, err)
	}
	if s := (SPG{PG{3, 0xa}, 2}).String(); s != "3.as2" {
		t.Errorf("SPG String %q", s)
	}
	if s := (SPG{PG{3, 0xa}, NoShard}).String(); s != "3.a" {
		t.Errorf("SPG String %q", s)
	}
}

func TestObjectLocator(t *testing.T) {
	l := NewObjectLocator(5)
	l.Namespace = "ns"
	b := Marshal(l)
	if b[0] != 6 || b[1] != 3 {
		t.Errorf("no hash: version/compat %d/%d, want 6/3", b[0], b[1])
	}
	back, err := Unmarshal[ObjectLocator](b)
	if err != nil || back != l {
		t.Errorf("round trip %v, %v", back, err)
	}
	l.Hash = 0x1234
	if b := Marshal(l); b[1] != 6 {
		t.Errorf("with hash: compat %d, want 6", b[1])
	}
	l.Key = "k"
	if _, err := Unmarshal[ObjectLocator](Marshal(l)); err == nil {
		t.Error("key and hash together decoded without error")
	}
	// Version 1 (no compat byte, no length): i32 pool, i16 preferred, key.
	v1 := []byte{1, 7, 0, 0, 0, 0xff, 0xff, 1, 0, 0, 0, 'k'}
	old, err := Unmarshal[ObjectLocator](v1)
	if err != nil || old != (ObjectLocator{Pool: 7, Key: "k", Hash: -1}) {
		t.Errorf("version 1: %v, %v", old, err)
	}
	if s := (ObjectLocator{Pool: 1, Namespace: "n", Key: "k", Hash: -1}).String(); s != "@1;n:k" {
		t.Errorf("String %q", s)
	}
}

func TestSnapContext(t *testing.T) {
	for _, tc := range []struct {
		c    SnapContext
		want bool
	}{
		{SnapContext{}, true},
		{SnapContext{Seq: 5, Snaps: []uint64{5, 3, 1}}, true},
		{SnapContext{Seq: 4, Snaps: []uint64{5}}, false},
		{SnapContext{Seq: 9, Snaps: []uint64{3, 3}}, false},
		{SnapContext{Seq: 9, Snaps: []uint64{1, 3}}, false},
	} {
		if tc.c.Valid() != tc.want {
			t.Errorf("%v.Valid() = %v", tc.c, !tc.want)
		}
	}
	if s := (SnapContext{Seq: 0x14, Snaps: []uint64{0x12, 3}}).String(); s != "14=[12,3]" {
		t.Errorf("String %q", s)
	}
}

func TestSmallTypeStrings(t *testing.T) {
	r := ReqID{Name: EntityName{EntityTypeClient, 4123}, Tid: 77, Inc: 1}
	if r.String() != "client.4123.1:77" {
		t.Errorf("ReqID %q", r.String())
	}
	if s := (EVersion{Version: 12, Epoch: 3}).String(); s != "3'12" {
		t.Errorf("EVersion %q", s)
	}
	back, err := Unmarshal[EVersion](Marshal(EVersion{Version: 12, Epoch: 3}))
	if err != nil || back != (EVersion{Version: 12, Epoch: 3}) {
		t.Errorf("EVersion round trip %v %v", back, err)
	}
}
