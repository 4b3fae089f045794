package cls

import (
	"sort"

	"github.com/purerbd/purerbd/rados/denc"
)

// Groups (consistency groups): the pool's rbd_group_directory maps group
// names to ids; each group's header rbd_group_header.<id> keeps its
// member images (omap keys image_<pool hex>_<image id>) and its
// snapshots (keys snapshot_<snap id>); each member image's header keeps
// a back reference (key rbd_group_ref).

// GroupImageState is cls::rbd::GroupImageLinkState: whether an image's
// membership is complete on both sides.
type GroupImageState uint8

// The link states (attached is 0).
const (
	GroupImageAttached   GroupImageState = 0
	GroupImageIncomplete GroupImageState = 1
)

// GroupSnapState is cls::rbd::GroupSnapshotState.
type GroupSnapState uint8

// The group snapshot states.
const (
	GroupSnapIncomplete GroupSnapState = 0
	GroupSnapComplete   GroupSnapState = 1
)

// GroupImageSpec is cls::rbd::GroupImageSpec: a member image.
type GroupImageSpec struct {
	ImageID string
	PoolID  int64
}

// Decode reads a GroupImageSpec.
func (s *GroupImageSpec) Decode(d *denc.Decoder) {
	d.Versioned("GroupImageSpec", 1, func(d *denc.Decoder, _ uint8) {
		s.ImageID = d.String("image_id")
		s.PoolID = d.I64("pool_id")
	})
}

// Encode writes a GroupImageSpec.
func (s GroupImageSpec) Encode(e *denc.Encoder) {
	e.Versioned(1, 1, func(e *denc.Encoder) {
		e.String(s.ImageID)
		e.I64(s.PoolID)
	})
}

// GroupImageStatus is cls::rbd::GroupImageStatus: a member and its link
// state.
type GroupImageStatus struct {
	Spec  GroupImageSpec
	State GroupImageState
}

// Decode reads a GroupImageStatus.
func (s *GroupImageStatus) Decode(d *denc.Decoder) {
	d.Versioned("GroupImageStatus", 1, func(d *denc.Decoder, _ uint8) {
		s.Spec.Decode(d)
		s.State = GroupImageState(d.U8("state"))
	})
}

// Encode writes a GroupImageStatus.
func (s GroupImageStatus) Encode(e *denc.Encoder) {
	e.Versioned(1, 1, func(e *denc.Encoder) {
		s.Spec.Encode(e)
		e.U8(uint8(s.State))
	})
}

// Decode reads a GroupSpec (the image's rbd_group_ref).
func (s *GroupSpec) Decode(d *denc.Decoder) {
	d.Versioned("GroupSpec", 1, func(d *denc.Decoder, _ uint8) {
		s.PoolID = d.I64("pool_id")
		s.GroupID = d.String("group_id")
	})
}

// Encode writes a GroupSpec.
func (s GroupSpec) Encode(e *denc.Encoder) {
	e.Versioned(1, 1, func(e *denc.Encoder) {
		e.I64(s.PoolID)
		e.String(s.GroupID)
	})
}

// Valid is GroupSpec::is_valid: the image belongs to a group.
func (s GroupSpec) Valid() bool { return s.GroupID != "" && s.PoolID != -1 }

// ImageSnapshotSpec is cls::rbd::ImageSnapshotSpec: one member image's
// snapshot within a group snapshot.
type ImageSnapshotSpec struct {
	PoolID  int64
	ImageID string
	SnapID  uint64
}

// Decode reads an ImageSnapshotSpec.
func (s *ImageSnapshotSpec) Decode(d *denc.Decoder) {
	d.Versioned("ImageSnapshotSpec", 1, func(d *denc.Decoder, _ uint8) {
		s.PoolID = d.I64("pool")
		s.ImageID = d.String("image_id")
		s.SnapID = d.U64("snap_id")
	})
}

// Encode writes an ImageSnapshotSpec.
func (s ImageSnapshotSpec) Encode(e *denc.Encoder) {
	e.Versioned(1, 1, func(e *denc.Encoder) {
		e.I64(s.PoolID)
		e.String(s.ImageID)
		e.U64(s.SnapID)
	})
}

// GroupSnapshot is cls::rbd::GroupSnapshot, a group snapshot's record.
type GroupSnapshot struct {
	ID    string
	Name  string
	State GroupSnapState
	Snaps []ImageSnapshotSpec
	// Version is the struct version read (1 when written by Pacific to
	// Tentacle; Encode writes 1 when it is 0). Tail keeps the fields of
	// newer versions after the image snapshots (a group snapshot
	// namespace), so that a record read and written back (renamed,
	// completed) keeps them.
	Version uint8
	Tail    []byte
}

// Decode reads a GroupSnapshot.
func (s *GroupSnapshot) Decode(d *denc.Decoder) {
	*s = GroupSnapshot{}
	s.Version = d.Versioned("GroupSnapshot", 1, func(d *denc.Decoder, _ uint8) {
		s.ID = d.String("id")
		s.Name = d.String("name")
		s.State = GroupSnapState(d.U8("state"))
		s.Snaps = denc.List(d, "snaps", 14, denc.Get[ImageSnapshotSpec])
		if rest := d.Rest(); len(rest) > 0 {
			s.Tail = append([]byte(nil), rest...)
			d.Skip("newer fields", len(rest))
		}
	})
}

// Encode writes a GroupSnapshot in the version it was read in.
func (s GroupSnapshot) Encode(e *denc.Encoder) {
	v := s.Version
	if v == 0 {
		v = 1
	}
	e.Versioned(v, 1, func(e *denc.Encoder) {
		e.String(s.ID)
		e.String(s.Name)
		e.U8(uint8(s.State))
		denc.PutList(e, s.Snaps, denc.Put[ImageSnapshotSpec])
		e.Raw(s.Tail)
	})
}

// GroupDirAdd is rbd.group_dir_add on rbd_group_directory, which it
// creates (EEXIST when the name is taken).
func GroupDirAdd(name, id string) Method {
	return rbd("group_dir_add", args(func(e *denc.Encoder) { e.String(name); e.String(id) }))
}

// GroupDirRemove is rbd.group_dir_remove (ENOENT when there is no such
// group, ESTALE when name and id do not match).
func GroupDirRemove(name, id string) Method {
	return rbd("group_dir_remove", args(func(e *denc.Encoder) { e.String(name); e.String(id) }))
}

// GroupDirRename is rbd.group_dir_rename.
func GroupDirRename(src, dst, id string) Method {
	return rbd("group_dir_rename", args(func(e *denc.Encoder) { e.String(src); e.String(dst); e.String(id) }))
}

// GroupDirList is rbd.group_dir_list: up to max groups after name start.
func GroupDirList(start string, max uint64) Method {
	return rbd("group_dir_list", args(func(e *denc.Encoder) { e.String(start); e.U64(max) }))
}

// DecodeGroupDirList parses group_dir_list's reply (a map of name to
// id), in name order.
func DecodeGroupDirList(out []byte) (entries []DirEntry, err error) {
	err = reply("group_dir_list", out, func(d *denc.Decoder) {
		entries = denc.List(d, "groups", 8, func(d *denc.Decoder) DirEntry {
			return DirEntry{Name: d.String("name"), ID: d.String("id")}
		})
	})
	sort.Slice(entries, func(i, j int) bool { return entries[i].Name < entries[j].Name })
	return
}

// GroupImageSet is rbd.group_image_set on a group header: records a
// member and its link state.
func GroupImageSet(st GroupImageStatus) Method {
	return rbd("group_image_set", denc.Marshal(st))
}

// GroupImageRemove is rbd.group_image_remove on a group header.
func GroupImageRemove(spec GroupImageSpec) Method {
	return rbd("group_image_remove", denc.Marshal(spec))
}

// GroupImageList is rbd.group_image_list on a group header: up to max
// members after start (GroupImageListStart for the first page).
func GroupImageList(start GroupImageSpec, max uint64) Method {
	return rbd("group_image_list", args(func(e *denc.Encoder) { start.Encode(e); e.U64(max) }))
}

// GroupImageListStart is librbd's default GroupImageSpec (pool -1),
// which starts a listing at the first member.
var GroupImageListStart = GroupImageSpec{PoolID: -1}

// DecodeGroupImageList parses group_image_list's reply.
func DecodeGroupImageList(out []byte) (images []GroupImageStatus, err error) {
	err = reply("group_image_list", out, func(d *denc.Decoder) {
		images = denc.List(d, "images", 13, denc.Get[GroupImageStatus])
	})
	return
}

// ImageGroupAdd is rbd.image_group_add on an image header (EEXIST when
// the image belongs to another group; it sets the group op feature).
func ImageGroupAdd(g GroupSpec) Method { return rbd("image_group_add", denc.Marshal(g)) }

// ImageGroupRemove is rbd.image_group_remove on an image header (ENOENT
// when the image is in no group, EBADF when in another one).
func ImageGroupRemove(g GroupSpec) Method { return rbd("image_group_remove", denc.Marshal(g)) }

// ImageGroupGet is rbd.image_group_get on an image header.
func ImageGroupGet() Method { return rbd("image_group_get", nil) }

// DecodeImageGroupGet parses image_group_get's reply (an invalid spec,
// pool -1, when the image is in no group).
func DecodeImageGroupGet(out []byte) (g GroupSpec, err error) {
	err = reply("image_group_get", out, func(d *denc.Decoder) { g.Decode(d) })
	return
}

// GroupSnapSet is rbd.group_snap_set on a group header: adds (state
// incomplete; EEXIST when the id or name is taken) or updates a group
// snapshot record.
func GroupSnapSet(s GroupSnapshot) Method { return rbd("group_snap_set", denc.Marshal(s)) }

// GroupSnapRemove is rbd.group_snap_remove on a group header.
func GroupSnapRemove(id string) Method {
	return rbd("group_snap_remove", args(func(e *denc.Encoder) { e.String(id) }))
}

// GroupSnapGetByID is rbd.group_snap_get_by_id on a group header.
func GroupSnapGetByID(id string) Method {
	return rbd("group_snap_get_by_id", args(func(e *denc.Encoder) { e.String(id) }))
}

// DecodeGroupSnapGetByID parses group_snap_get_by_id's reply.
func DecodeGroupSnapGetByID(out []byte) (s GroupSnapshot, err error) {
	err = reply("group_snap_get_by_id", out, func(d *denc.Decoder) { s.Decode(d) })
	return
}

// GroupSnapList is rbd.group_snap_list on a group header: up to max
// snapshots after start (the zero record starts at the beginning).
// Pacific lists them by id; newer OSDs in creation order.
func GroupSnapList(start GroupSnapshot, max uint64) Method {
	return rbd("group_snap_list", args(func(e *denc.Encoder) { start.Encode(e); e.U64(max) }))
}

// DecodeGroupSnapList parses group_snap_list's reply.
func DecodeGroupSnapList(out []byte) (snaps []GroupSnapshot, err error) {
	err = reply("group_snap_list", out, func(d *denc.Decoder) {
		snaps = denc.List(d, "group snapshots", 19, denc.Get[GroupSnapshot])
	})
	return
}
