package rados

import (
	"github.com/purerbd/purerbd/rados/osdc"
)

// SnapSet is an object's clones as list-snaps reports them, oldest
// first, the head (CloneID SnapHead) last when it exists.
type SnapSet = osdc.SnapSet

// Clone is one clone of an object in a SnapSet.
type Clone = osdc.Clone

// Extent is a byte range of an object.
type Extent = osdc.Extent

// SnapHead is the clone id of an object's head in a SnapSet (CEPH_NOSNAP).
const SnapHead = osdc.SnapHead

// SnapDir is the snapshot id that reads an object's snapshot directory
// (CEPH_SNAPDIR), where ListSnaps reads.
const SnapDir = osdc.SnapDir

// SnapSetStep holds an object's snap set.
type SnapSetStep struct {
	Step
	SnapSet SnapSet
}

func (s *SnapSetStep) take(o *osdc.OSDOp) {
	if s.setRVal(o.RVal) {
		s.SnapSet, s.Err = osdc.ParseSnapSet(o.OutData)
	}
}

// ListSnaps lists the object's clones (librados' list_snaps, `rados
// listsnaps`). It reads the object's snapshot directory, SnapDir, so it
// replaces any snapshot the read was set to before (set none after); an
// object with neither head nor
// clones fails the read with ErrNotFound.
func (r *ReadOp) ListSnaps() *SnapSetStep {
	s := &SnapSetStep{}
	r.l.add(osdc.ListSnaps(), s)
	r.snap, r.snapSet = osdc.SnapDir, true
	return s
}
