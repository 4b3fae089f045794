package rbd

import (
	"time"

	"github.com/purerbd/purerbd/rbd/internal/cls"
)

// SnapInfo describes one snapshot.
type SnapInfo struct {
	ID   uint64
	Name string
	// Size is the image's size when the snapshot was taken.
	Size int64
	// Namespace says whose snapshot it is: users take and name those of
	// SnapNamespaceUser; RBD keeps the others itself.
	Namespace SnapNamespace
	// Timestamp is when the snapshot was taken; zero when the cluster
	// recorded no time.
	Timestamp time.Time
	// Protected is Protection == SnapProtected: clones may be made of
	// the snapshot, and it cannot be removed.
	Protected  bool
	Protection ProtectionStatus
	// ChildCount counts the clones attached to the snapshot (clone v2).
	ChildCount int
	// ParentOverlap is how much of the parent the snapshot sees (clones).
	ParentOverlap int64
	// Flags are the snapshot's flags (FlagObjectMapInvalid, ...).
	Flags uint64
	// Group is the group snapshot a snapshot of SnapNamespaceGroup
	// belongs to (nil for the others).
	Group *SnapGroup
	// TrashOriginalName is the name a snapshot of SnapNamespaceTrash had.
	TrashOriginalName string
}

// SnapGroup names a group snapshot by ids (GroupSnapshotOf looks their
// names up).
type SnapGroup struct {
	PoolID      int64
	GroupID     string
	GroupSnapID string
}

// SnapNamespace is the kind of a snapshot (cls::rbd::SnapshotNamespaceType).
type SnapNamespace uint32

// Snapshot namespaces, numbered as on the wire.
const (
	// SnapNamespaceUser: a snapshot users take, list and remove by name.
	SnapNamespaceUser SnapNamespace = 0
	// SnapNamespaceGroup: taken as part of a group snapshot.
	SnapNamespaceGroup SnapNamespace = 1
	// SnapNamespaceTrash: removed while clones still use it; deleted with
	// its last clone.
	SnapNamespaceTrash SnapNamespace = 2
	// SnapNamespaceMirror: taken by rbd-mirror.
	SnapNamespaceMirror SnapNamespace = 3
)

// String returns the namespace's name as `rbd snap ls --all` prints it
// ("user", "group", "trash", "mirror").
func (n SnapNamespace) String() string { return cls.NamespaceType(n).String() }

// ProtectionStatus is a snapshot's protection state.
type ProtectionStatus uint8

// Protection states, numbered as on the wire.
const (
	SnapUnprotected  ProtectionStatus = 0
	SnapUnprotecting ProtectionStatus = 1 // being unprotected: clones are being checked for
	SnapProtected    ProtectionStatus = 2
)

// String returns "unprotected", "unprotecting" or "protected".
func (p ProtectionStatus) String() string {
	switch p {
	case SnapUnprotected:
		return "unprotected"
	case SnapUnprotecting:
		return "unprotecting"
	case SnapProtected:
		return "protected"
	}
	return "unknown"
}

// info converts a header's record of a snapshot.
func (s snapMeta) info() SnapInfo {
	out := SnapInfo{ID: s.ID, Name: s.Name, Size: int64(s.Size), Namespace: SnapNamespace(s.Namespace.Type),
		Protected: s.ProtectionStatus == cls.Protected, Protection: ProtectionStatus(s.ProtectionStatus),
		ChildCount: int(s.ChildCount), ParentOverlap: int64(s.ParentOverlap), Flags: s.Flags}
	if !s.Timestamp.IsZero() {
		out.Timestamp = s.Timestamp.Time()
	}
	switch s.Namespace.Type {
	case cls.NamespaceGroup:
		g := s.Namespace.Group
		out.Group = &SnapGroup{PoolID: g.GroupPool, GroupID: g.GroupID, GroupSnapID: g.GroupSnapshotID}
	case cls.NamespaceTrash:
		out.TrashOriginalName = s.Namespace.Trash.OriginalName
	}
	return out
}

// snapInfos converts a header's snapshots, keeping their order.
func snapInfos(snaps []snapMeta) []SnapInfo {
	out := make([]SnapInfo, len(snaps))
	for i, s := range snaps {
		out[i] = s.info()
	}
	return out
}
