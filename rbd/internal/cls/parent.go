package cls

import "github.com/purerbd/purerbd/rados/denc"

// Methods on a header that describe and change an image's parent, and on
// a parent's header that track its clones (clone v2), plus the legacy
// rbd_children object (clone v1).

// ParentGet is rbd.parent_get.
func ParentGet() Method { return rbd("parent_get", nil) }

// DecodeParentGet parses parent_get's reply.
func DecodeParentGet(out []byte) (spec ParentImageSpec, err error) {
	err = reply("parent_get", out, func(d *denc.Decoder) { spec.Decode(d) })
	return
}

// ParentOverlapGet is rbd.parent_overlap_get for snap.
func ParentOverlapGet(snap uint64) Method {
	return rbd("parent_overlap_get", args(func(e *denc.Encoder) { e.U64(snap) }))
}

// DecodeParentOverlapGet parses parent_overlap_get's reply (nil: none).
func DecodeParentOverlapGet(out []byte) (overlap *uint64, err error) {
	err = reply("parent_overlap_get", out, func(d *denc.Decoder) { overlap = optU64(d, "parent_overlap") })
	return
}

// GetParent is the legacy rbd.get_parent for snap.
func GetParent(snap uint64) Method {
	return rbd("get_parent", args(func(e *denc.Encoder) { e.U64(snap) }))
}

// DecodeGetParent parses get_parent's reply.
func DecodeGetParent(out []byte) (spec ParentImageSpec, overlap uint64, err error) {
	err = reply("get_parent", out, func(d *denc.Decoder) {
		spec.PoolID = d.I64("pool")
		spec.ImageID = d.String("image_id")
		spec.SnapID = d.U64("snap_id")
		overlap = d.U64("overlap")
	})
	return
}

// ParentAttach is rbd.parent_attach.
func ParentAttach(spec ParentImageSpec, overlap uint64, reattach bool) Method {
	return rbd("parent_attach", args(func(e *denc.Encoder) {
		spec.Encode(e)
		e.U64(overlap)
		e.Bool(reattach)
	}))
}

// ParentDetach is rbd.parent_detach.
func ParentDetach() Method { return rbd("parent_detach", nil) }

// SetParent is the legacy rbd.set_parent (no namespaces).
func SetParent(spec ParentImageSpec, overlap uint64) Method {
	return rbd("set_parent", args(func(e *denc.Encoder) {
		e.I64(spec.PoolID)
		e.String(spec.ImageID)
		e.U64(spec.SnapID)
		e.U64(overlap)
	}))
}

// RemoveParent is the legacy rbd.remove_parent.
func RemoveParent() Method { return rbd("remove_parent", nil) }

// ChildAttach is rbd.child_attach on the parent's header.
func ChildAttach(snap uint64, child ChildImageSpec) Method {
	return rbd("child_attach", args(func(e *denc.Encoder) { e.U64(snap); child.Encode(e) }))
}

// ChildDetach is rbd.child_detach on the parent's header.
func ChildDetach(snap uint64, child ChildImageSpec) Method {
	return rbd("child_detach", args(func(e *denc.Encoder) { e.U64(snap); child.Encode(e) }))
}

// ChildrenList is rbd.children_list for a parent snapshot.
func ChildrenList(snap uint64) Method {
	return rbd("children_list", args(func(e *denc.Encoder) { e.U64(snap) }))
}

// DecodeChildrenList parses children_list's reply.
func DecodeChildrenList(out []byte) (children []ChildImageSpec, err error) {
	err = reply("children_list", out, func(d *denc.Decoder) {
		children = denc.List(d, "children", 6, denc.Get[ChildImageSpec])
	})
	return
}

// AddChild is the legacy rbd.add_child on rbd_children.
func AddChild(parent ParentImageSpec, childID string) Method {
	return rbd("add_child", args(func(e *denc.Encoder) {
		e.I64(parent.PoolID)
		e.String(parent.ImageID)
		e.U64(parent.SnapID)
		e.String(childID)
	}))
}

// RemoveChild is the legacy rbd.remove_child on rbd_children.
func RemoveChild(parent ParentImageSpec, childID string) Method {
	m := AddChild(parent, childID)
	m.Name = "remove_child"
	return m
}

// GetChildren is the legacy rbd.get_children on rbd_children.
func GetChildren(parent ParentImageSpec) Method {
	return rbd("get_children", args(func(e *denc.Encoder) {
		e.I64(parent.PoolID)
		e.String(parent.ImageID)
		e.U64(parent.SnapID)
	}))
}

// DecodeStringList parses a reply that is a list or set of strings
// (get_children).
func DecodeStringList(out []byte) (list []string, err error) {
	err = reply("string list", out, func(d *denc.Decoder) { list = denc.List(d, "strings", 4, str) })
	return
}
