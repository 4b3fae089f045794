package osdc

import (
	"github.com/purerbd/purerbd/rados/denc"
)

// The list-snaps operation (CEPH_OSD_OP_LIST_SNAPS, librados'
// list_snaps, `rados listsnaps`) reports an object's clones: which
// snapshots each clone serves, the bytes it shares with the next newer
// clone (or the head) and its size. It must be sent with the snapshot
// id SnapDir.

// ListSnaps builds a list-snaps operation (ParseSnapSet reads its
// result).
func ListSnaps() OSDOp { return OSDOp{Code: OpListSnaps} }

// Clone is one clone of an object (clone_info): CloneID is the snapshot
// id it was made at, SnapHead for the head object itself.
type Clone struct {
	CloneID uint64
	// Snaps are the snapshots that read this clone, oldest first (empty
	// for the head).
	Snaps []uint64
	// Overlap are the byte ranges this clone shares with the next newer
	// clone or the head.
	Overlap []Extent
	Size    uint64
}

// SnapSet is an object's clones (obj_list_snap_response_t), oldest
// first, the head last if it exists, and the newest snapshot sequence
// the object has seen.
type SnapSet struct {
	Clones []Clone
	Seq    uint64
}

// Decode reads an obj_list_snap_response_t.
func (s *SnapSet) Decode(d *denc.Decoder) {
	d.Versioned("obj_list_snap_response_t", 2, func(d *denc.Decoder, v uint8) {
		s.Clones = denc.List(d, "clones", 6+8+4+4+8, func(d *denc.Decoder) Clone {
			var c Clone
			d.Versioned("clone_info", 1, func(d *denc.Decoder, _ uint8) {
				c.CloneID = d.U64("cloneid")
				c.Snaps = denc.List(d, "clone snaps", 8, func(d *denc.Decoder) uint64 { return d.U64("snap") })
				c.Overlap = denc.List(d, "clone overlap", 16, func(d *denc.Decoder) Extent {
					return Extent{Offset: d.U64("overlap offset"), Length: d.U64("overlap length")}
				})
				c.Size = d.U64("clone size")
			})
			return c
		})
		s.Seq = SnapHead
		if v >= 2 {
			s.Seq = d.U64("seq")
		}
	})
}

// Encode writes an obj_list_snap_response_t as Ceph does (version 2).
func (s *SnapSet) Encode(e *denc.Encoder) {
	e.Versioned(2, 1, func(e *denc.Encoder) {
		e.U32(uint32(len(s.Clones)))
		for _, c := range s.Clones {
			e.Versioned(1, 1, func(e *denc.Encoder) {
				e.U64(c.CloneID)
				e.U32(uint32(len(c.Snaps)))
				for _, sn := range c.Snaps {
					e.U64(sn)
				}
				e.U32(uint32(len(c.Overlap)))
				for _, o := range c.Overlap {
					e.U64(o.Offset)
					e.U64(o.Length)
				}
				e.U64(c.Size)
			})
		}
		e.U64(s.Seq)
	})
}

// ParseSnapSet decodes a list-snaps result.
func ParseSnapSet(out []byte) (SnapSet, error) {
	var s SnapSet
	d := denc.NewDecoder(out)
	s.Decode(d)
	if err := parseErr("list-snaps", d); err != nil {
		return SnapSet{}, err
	}
	return s, nil
}
