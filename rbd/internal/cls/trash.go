package cls

import (
	"sort"

	"github.com/purerbd/purerbd/rados/denc"
)

// TrashSource is cls::rbd::TrashImageSource: why an image was moved to
// the trash.
type TrashSource uint8

// The sources librbd records.
const (
	TrashSourceUser       TrashSource = 0
	TrashSourceMirroring  TrashSource = 1
	TrashSourceMigration  TrashSource = 2
	TrashSourceRemoving   TrashSource = 3
	TrashSourceUserParent TrashSource = 4
)

// String is the name rbd trash ls prints (in capitals there).
func (s TrashSource) String() string {
	switch s {
	case TrashSourceUser:
		return "user"
	case TrashSourceMirroring:
		return "mirroring"
	case TrashSourceMigration:
		return "migration"
	case TrashSourceRemoving:
		return "removing"
	case TrashSourceUserParent:
		return "user_parent"
	}
	return "unknown"
}

// TrashImageSpec is cls::rbd::TrashImageSpec: an image in the pool's
// trash (rbd_trash's omap value for key id_<image id>).
type TrashImageSpec struct {
	Source           TrashSource
	Name             string
	DeletionTime     denc.UTime
	DefermentEndTime denc.UTime
	State            uint8 // version 2: normal, moving, removing, restoring
}

// Decode reads a TrashImageSpec (versions 1 and 2).
func (s *TrashImageSpec) Decode(d *denc.Decoder) {
	d.Versioned("TrashImageSpec", 2, func(d *denc.Decoder, v uint8) {
		s.Source = TrashSource(d.U8("source"))
		s.Name = d.String("name")
		s.DeletionTime.Decode(d)
		s.DefermentEndTime.Decode(d)
		if v >= 2 {
			s.State = d.U8("state")
		}
	})
}

// Encode writes a TrashImageSpec (version 2).
func (s TrashImageSpec) Encode(e *denc.Encoder) {
	e.Versioned(2, 1, func(e *denc.Encoder) {
		e.U8(uint8(s.Source))
		e.String(s.Name)
		s.DeletionTime.Encode(e)
		s.DefermentEndTime.Encode(e)
		e.U8(s.State)
	})
}

// TrashList is rbd.trash_list on the pool's rbd_trash: up to max
// entries after image id start.
func TrashList(start string, max uint64) Method {
	return rbd("trash_list", args(func(e *denc.Encoder) { e.String(start); e.U64(max) }))
}

// TrashEntry is one image of the trash: its id and record.
type TrashEntry struct {
	ID   string
	Spec TrashImageSpec
}

// DecodeTrashList parses trash_list's reply (a map of image id to
// spec), in id order.
func DecodeTrashList(out []byte) (entries []TrashEntry, err error) {
	err = reply("trash_list", out, func(d *denc.Decoder) {
		entries = denc.List(d, "trash images", 4, func(d *denc.Decoder) TrashEntry {
			var t TrashEntry
			t.ID = d.String("id")
			t.Spec.Decode(d)
			return t
		})
	})
	sort.Slice(entries, func(i, j int) bool { return entries[i].ID < entries[j].ID })
	return
}
