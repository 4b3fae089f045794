package cls

import (
	"fmt"

	"github.com/purerbd/purerbd/rados/denc"
)

// NamespaceType is cls::rbd::SnapshotNamespaceType.
type NamespaceType uint32

// Snapshot namespace types.
const (
	NamespaceUser   NamespaceType = 0
	NamespaceGroup  NamespaceType = 1
	NamespaceTrash  NamespaceType = 2
	NamespaceMirror NamespaceType = 3
)

func (t NamespaceType) String() string {
	switch t {
	case NamespaceUser:
		return "user"
	case NamespaceGroup:
		return "group"
	case NamespaceTrash:
		return "trash"
	case NamespaceMirror:
		return "mirror"
	}
	return fmt.Sprintf("unknown(%d)", uint32(t))
}

// GroupSnapshotNamespace is the namespace of an image snapshot taken as
// part of a group snapshot.
type GroupSnapshotNamespace struct {
	GroupPool       int64
	GroupID         string
	GroupSnapshotID string
}

// TrashSnapshotNamespace is the namespace of a snapshot removed while
// clones still depend on it.
type TrashSnapshotNamespace struct {
	OriginalName string
	OriginalType NamespaceType
}

// GroupSpec is cls::rbd::GroupSpec.
type GroupSpec struct {
	PoolID  int64
	GroupID string
}

// SnapSeq is one pair of a mirror snapshot's snap_seqs map.
type SnapSeq struct{ Remote, Local uint64 }

// MirrorSnapshotNamespace is the namespace of an rbd-mirror snapshot.
type MirrorSnapshotNamespace struct {
	State                  uint8 // primary 0, primary-demoted 1, non-primary 2, non-primary-demoted 3
	Complete               bool
	PeerUUIDs              []string // a std::set: sorted, unique
	PrimaryMirrorUUID      string
	PrimarySnapID          uint64
	LastCopiedObjectNumber uint64
	SnapSeqs               []SnapSeq // a std::map, in key order
	GroupSpec              GroupSpec // namespace version >= 2
	GroupSnapID            string    // namespace version >= 2
}

// SnapshotNamespace is cls::rbd::SnapshotNamespace, a tagged union.
type SnapshotNamespace struct {
	Type   NamespaceType
	Group  GroupSnapshotNamespace  // Type == NamespaceGroup
	Trash  TrashSnapshotNamespace  // Type == NamespaceTrash
	Mirror MirrorSnapshotNamespace // Type == NamespaceMirror
	// Unknown keeps the body of a namespace type this package does not
	// know, so that it re-encodes unchanged.
	Unknown []byte
	// Version is the envelope version read; Encode writes 1 when it is 0
	// (what Pacific writes), 2 when a mirror group spec must be carried.
	Version uint8
}

// Decode reads a SnapshotNamespace.
func (n *SnapshotNamespace) Decode(d *denc.Decoder) {
	*n = SnapshotNamespace{}
	n.Version = d.Versioned("SnapshotNamespace", 1, func(d *denc.Decoder, v uint8) {
		n.Type = NamespaceType(d.U32("snapshot namespace type"))
		switch n.Type {
		case NamespaceUser:
		case NamespaceGroup:
			n.Group.GroupPool = d.I64("group_pool")
			n.Group.GroupID = d.String("group_id")
			n.Group.GroupSnapshotID = d.String("group_snapshot_id")
		case NamespaceTrash:
			n.Trash.OriginalName = d.String("original_name")
			n.Trash.OriginalType = NamespaceType(d.U32("original_snapshot_namespace_type"))
		case NamespaceMirror:
			m := &n.Mirror
			m.State = d.U8("mirror state")
			m.Complete = d.Bool("complete")
			m.PeerUUIDs = denc.List(d, "mirror_peer_uuids", 4, str)
			m.PrimaryMirrorUUID = d.String("primary_mirror_uuid")
			m.PrimarySnapID = d.U64("primary_snap_id")
			m.LastCopiedObjectNumber = d.U64("last_copied_object_number")
			m.SnapSeqs = denc.List(d, "snap_seqs", 16, func(d *denc.Decoder) SnapSeq {
				return SnapSeq{Remote: d.U64("snap_seq key"), Local: d.U64("snap_seq value")}
			})
			if v >= 2 {
				d.Versioned("GroupSpec", 1, func(d *denc.Decoder, _ uint8) {
					m.GroupSpec.PoolID = d.I64("pool_id")
					m.GroupSpec.GroupID = d.String("group_id")
				})
				m.GroupSnapID = d.String("group_snap_id")
			}
		default:
			n.Unknown = append([]byte(nil), d.Rest()...)
			d.Skip("unknown namespace", len(n.Unknown))
		}
	})
}

// Encode writes a SnapshotNamespace.
func (n SnapshotNamespace) Encode(e *denc.Encoder) {
	v := n.Version
	if v == 0 {
		v = 1
	}
	e.Versioned(v, 1, func(e *denc.Encoder) {
		e.U32(uint32(n.Type))
		switch n.Type {
		case NamespaceUser:
		case NamespaceGroup:
			e.I64(n.Group.GroupPool)
			e.String(n.Group.GroupID)
			e.String(n.Group.GroupSnapshotID)
		case NamespaceTrash:
			e.String(n.Trash.OriginalName)
			e.U32(uint32(n.Trash.OriginalType))
		case NamespaceMirror:
			m := n.Mirror
			e.U8(m.State)
			e.Bool(m.Complete)
			denc.PutList(e, m.PeerUUIDs, putStr)
			e.String(m.PrimaryMirrorUUID)
			e.U64(m.PrimarySnapID)
			e.U64(m.LastCopiedObjectNumber)
			denc.PutList(e, m.SnapSeqs, func(e *denc.Encoder, s SnapSeq) { e.U64(s.Remote); e.U64(s.Local) })
			if v >= 2 {
				e.Versioned(1, 1, func(e *denc.Encoder) {
					e.I64(m.GroupSpec.PoolID)
					e.String(m.GroupSpec.GroupID)
				})
				e.String(m.GroupSnapID)
			}
		default:
			e.Raw(n.Unknown)
		}
	})
}

// UserNamespace is the namespace of ordinary snapshots.
var UserNamespace = SnapshotNamespace{Type: NamespaceUser}

// SnapshotInfo is cls::rbd::SnapshotInfo, the reply of snapshot_get.
type SnapshotInfo struct {
	ID         uint64
	Namespace  SnapshotNamespace
	Name       string
	ImageSize  uint64
	Timestamp  denc.UTime
	ChildCount uint32
}

// Decode reads a SnapshotInfo.
func (s *SnapshotInfo) Decode(d *denc.Decoder) {
	d.Versioned("SnapshotInfo", 1, func(d *denc.Decoder, _ uint8) {
		s.ID = d.U64("id")
		s.Namespace.Decode(d)
		s.Name = d.String("name")
		s.ImageSize = d.U64("image_size")
		s.Timestamp.Decode(d)
		s.ChildCount = d.U32("child_count")
	})
}

// Encode writes a SnapshotInfo.
func (s SnapshotInfo) Encode(e *denc.Encoder) {
	e.Versioned(1, 1, func(e *denc.Encoder) {
		e.U64(s.ID)
		s.Namespace.Encode(e)
		e.String(s.Name)
		e.U64(s.ImageSize)
		s.Timestamp.Encode(e)
		e.U32(s.ChildCount)
	})
}

// Snapshot protection states (RBD_PROTECTION_STATUS_*).
const (
	Unprotected  uint8 = 0
	Unprotecting uint8 = 1
	Protected    uint8 = 2
)

// SnapRecord is cls_rbd_snap, the record kept in a header's omap under
// "snapshot_<id>".
type SnapRecord struct {
	ID               uint64
	Name             string
	ImageSize        uint64
	Features         uint64     // only in records with compat < 8
	Parent           ParentInfo // only in records with compat < 8
	ProtectionStatus uint8
	Flags            uint64
	Namespace        SnapshotNamespace
	Timestamp        denc.UTime
	ChildCount       uint32
	ParentOverlap    *uint64
	Version, Compat  uint8
}

// Decode reads a cls_rbd_snap of any version up to 8.
func (s *SnapRecord) Decode(d *denc.Decoder) {
	*s = SnapRecord{Namespace: UserNamespace}
	if r := d.Rest(); len(r) >= 2 {
		s.Compat = r[1]
	}
	s.Version = d.Versioned("cls_rbd_snap", 8, func(d *denc.Decoder, v uint8) {
		s.ID = d.U64("id")
		s.Name = d.String("name")
		s.ImageSize = d.U64("image_size")
		if s.Compat < 8 {
			s.Features = d.U64("features")
			if v >= 2 {
				s.Parent.Decode(d)
			}
		}
		if v >= 3 {
			s.ProtectionStatus = d.U8("protection_status")
		}
		if v >= 4 {
			s.Flags = d.U64("flags")
		}
		if v >= 5 {
			s.Namespace.Decode(d)
		}
		if v >= 6 {
			s.Timestamp.Decode(d)
		}
		if v >= 7 {
			s.ChildCount = d.U32("child_count")
		}
		if v >= 8 {
			s.ParentOverlap = optU64(d, "parent_overlap")
		}
	})
}

// Encode writes a cls_rbd_snap as version 8 with the compat version read
// (8, what Nautilus and newer write, by default).
func (s SnapRecord) Encode(e *denc.Encoder) {
	compat := s.Compat
	if compat == 0 {
		compat = 8
	}
	e.Versioned(8, compat, func(e *denc.Encoder) {
		e.U64(s.ID)
		e.String(s.Name)
		e.U64(s.ImageSize)
		if compat < 8 {
			e.U64(s.Features)
			s.Parent.Encode(e)
		}
		e.U8(s.ProtectionStatus)
		e.U64(s.Flags)
		s.Namespace.Encode(e)
		s.Timestamp.Encode(e)
		e.U32(s.ChildCount)
		putOptU64(e, s.ParentOverlap)
	})
}
