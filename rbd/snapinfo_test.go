package rbd

import (
	"testing"
	"time"

	"github.com/purerbd/purerbd/rados/denc"
	"github.com/purerbd/purerbd/rbd/internal/cls"
)

// TestSnapInfoWireValues checks that the rbd-level enumerations keep the
// wire's numbers, which SnapInfo converts by value.
func TestSnapInfoWireValues(t *testing.T) {
	for _, c := range []struct {
		got  SnapNamespace
		want cls.NamespaceType
	}{
		{SnapNamespaceUser, cls.NamespaceUser}, {SnapNamespaceGroup, cls.NamespaceGroup},
		{SnapNamespaceTrash, cls.NamespaceTrash}, {SnapNamespaceMirror, cls.NamespaceMirror},
	} {
		if uint32(c.got) != uint32(c.want) || c.got.String() != c.want.String() {
			t.Errorf("namespace %v (%d), want %v (%d)", c.got, c.got, c.want, c.want)
		}
	}
	for _, c := range []struct {
		got  ProtectionStatus
		want uint8
		name string
	}{
		{SnapUnprotected, cls.Unprotected, "unprotected"}, {SnapUnprotecting, cls.Unprotecting, "unprotecting"},
		{SnapProtected, cls.Protected, "protected"},
	} {
		if uint8(c.got) != c.want || c.got.String() != c.name {
			t.Errorf("protection %v (%d), want %s (%d)", c.got, c.got, c.name, c.want)
		}
	}
}

func TestSnapInfoOf(t *testing.T) {
	m := snapMeta{ID: 7, Name: "s", Size: 5 << 30, Namespace: cls.SnapshotNamespace{Type: cls.NamespaceTrash},
		Timestamp: denc.UTime{Sec: 1700000000, Nsec: 5000}, ProtectionStatus: cls.Protected,
		ChildCount: 3, ParentOverlap: 1 << 20, Flags: FlagObjectMapInvalid}
	got := m.info()
	want := SnapInfo{ID: 7, Name: "s", Size: 5 << 30, Namespace: SnapNamespaceTrash,
		Timestamp: time.Unix(1700000000, 5000).UTC(), Protected: true, Protection: SnapProtected,
		ChildCount: 3, ParentOverlap: 1 << 20, Flags: FlagObjectMapInvalid}
	if got != want {
		t.Errorf("info\n got %+v\nwant %+v", got, want)
	}
	if z := (snapMeta{}).info(); !z.Timestamp.IsZero() || z.Protected || z.Namespace != SnapNamespaceUser {
		t.Errorf("a snapshot without a time or protection: %+v", z)
	}
}

// TestHeaderLockerHeldBy matches a lock's holder with the header's
// watchers by entity, or by address whatever its type prefix.
func TestHeaderLockerHeldBy(t *testing.T) {
	lk := HeaderLocker{Client: "client.4123", Cookie: "node-a", Address: "10.0.0.1:0/2863412823"}
	for _, c := range []struct {
		w    Watcher
		want bool
	}{
		{Watcher{Client: "client.4123", Address: "v2:10.0.0.9:0/1"}, true},           // same entity
		{Watcher{Client: "client.5000", Address: "v1:10.0.0.1:0/2863412823"}, true},  // authenticated anew
		{Watcher{Client: "client.5000", Address: "10.0.0.1:0/2863412823"}, true},     // same address
		{Watcher{Client: "client.5000", Address: "v1:10.0.0.1:0/2863412824"}, false}, // restarted process
		{Watcher{Client: "client.5000", Address: "v1:10.0.0.2:0/2863412823"}, false}, // another host
		{Watcher{Client: "client.5000", Address: "not an address"}, false},           // unparsable
		{Watcher{Client: "client.5000", Address: "v1:[::1]:0/2863412823"}, false},    // another family
	} {
		if got := lk.HeldBy(c.w); got != c.want {
			t.Errorf("HeldBy(%+v) = %v, want %v", c.w, got, c.want)
		}
	}
	noAddr := HeaderLocker{Client: "client.4123", Cookie: "x"}
	if noAddr.HeldBy(Watcher{Client: "client.1", Address: "-"}) {
		t.Error("a locker without an address matched a watcher without one")
	}
	if lockerAddress(denc.EntityAddr{}) != "" {
		t.Errorf("blank address printed as %q", lockerAddress(denc.EntityAddr{}))
	}
}
