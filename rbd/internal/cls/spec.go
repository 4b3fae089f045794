package cls

import "github.com/purerbd/purerbd/rados/denc"

// ParentImageSpec is cls::rbd::ParentImageSpec: the snapshot a clone was
// made from.
type ParentImageSpec struct {
	PoolID        int64
	PoolNamespace string
	ImageID       string
	SnapID        uint64
}

// Exists reports whether s names a parent (librbd's exists()).
func (s ParentImageSpec) Exists() bool {
	return s.PoolID >= 0 && s.ImageID != "" && s.SnapID != NoSnap
}

// NoParent is the spec Ceph uses for "no parent".
var NoParent = ParentImageSpec{PoolID: -1, SnapID: NoSnap}

// Decode reads a ParentImageSpec (versioned 1).
func (s *ParentImageSpec) Decode(d *denc.Decoder) {
	d.Versioned("ParentImageSpec", 1, func(d *denc.Decoder, v uint8) {
		s.PoolID = d.I64("pool_id")
		s.PoolNamespace = d.String("pool_namespace")
		s.ImageID = d.String("image_id")
		s.SnapID = d.U64("snap_id")
	})
}

// Encode writes a ParentImageSpec.
func (s ParentImageSpec) Encode(e *denc.Encoder) {
	e.Versioned(1, 1, func(e *denc.Encoder) {
		e.I64(s.PoolID)
		e.String(s.PoolNamespace)
		e.String(s.ImageID)
		e.U64(s.SnapID)
	})
}

// ChildImageSpec is cls::rbd::ChildImageSpec: one clone attached to a
// parent snapshot (clone v2).
type ChildImageSpec struct {
	PoolID        int64
	PoolNamespace string
	ImageID       string
	// Version is the struct version read (1 has no namespace); Encode
	// writes 2 when it is 0.
	Version uint8
}

// Decode reads a ChildImageSpec (versions 1 and 2).
func (s *ChildImageSpec) Decode(d *denc.Decoder) {
	s.Version = d.Versioned("ChildImageSpec", 1, func(d *denc.Decoder, v uint8) {
		s.PoolID = d.I64("pool_id")
		s.ImageID = d.String("image_id")
		if v >= 2 {
			s.PoolNamespace = d.String("pool_namespace")
		}
	})
}

// Encode writes a ChildImageSpec as version 2 (or 1 when decoded so).
func (s ChildImageSpec) Encode(e *denc.Encoder) {
	v := s.Version
	if v == 0 || v > 2 {
		v = 2
	}
	e.Versioned(v, 1, func(e *denc.Encoder) {
		e.I64(s.PoolID)
		e.String(s.ImageID)
		if v >= 2 {
			e.String(s.PoolNamespace)
		}
	})
}

// ParentInfo is cls_rbd_parent, the record a clone's header keeps about
// its parent (and which parent_get / get_parent report).
type ParentInfo struct {
	ParentImageSpec
	// HeadOverlap is the bytes of the parent visible through the clone's
	// head; nil when not set.
	HeadOverlap *uint64
	Version     uint8
}

// Decode reads a cls_rbd_parent (version 1 with a plain overlap, version
// 2 with a namespace and an optional overlap).
func (p *ParentInfo) Decode(d *denc.Decoder) {
	p.Version = d.Versioned("cls_rbd_parent", 2, func(d *denc.Decoder, v uint8) {
		p.PoolID = d.I64("pool_id")
		if v >= 2 {
			p.PoolNamespace = d.String("pool_namespace")
		}
		p.ImageID = d.String("image_id")
		p.SnapID = d.U64("snap_id")
		if v == 1 {
			o := d.U64("overlap")
			p.HeadOverlap = &o
		} else {
			p.HeadOverlap = optU64(d, "head_overlap")
		}
	})
}

// Encode writes a cls_rbd_parent in the version it was read in (2 by
// default, what Nautilus and newer OSDs write).
func (p ParentInfo) Encode(e *denc.Encoder) {
	v := p.Version
	if v != 1 {
		v = 2
	}
	e.Versioned(v, v, func(e *denc.Encoder) {
		e.I64(p.PoolID)
		if v >= 2 {
			e.String(p.PoolNamespace)
		}
		e.String(p.ImageID)
		e.U64(p.SnapID)
		if v == 1 {
			var o uint64
			if p.HeadOverlap != nil {
				o = *p.HeadOverlap
			}
			e.U64(o)
		} else {
			putOptU64(e, p.HeadOverlap)
		}
	})
}

func optU64(d *denc.Decoder, what string) *uint64 {
	v, ok := denc.Optional(d, what, func(d *denc.Decoder) uint64 { return d.U64(what) })
	if !ok {
		return nil
	}
	return &v
}

func putOptU64(e *denc.Encoder, v *uint64) {
	if v == nil {
		e.Bool(false)
		return
	}
	e.Bool(true)
	e.U64(*v)
}
