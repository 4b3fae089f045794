package cls

import (
	"sort"

	"github.com/purerbd/purerbd/rados/denc"
)

// Methods on rbd_directory (the pool's name <-> id index) and on an
// image's id object (rbd_id.<name>).

// GetID is rbd.get_id on rbd_id.<name>.
func GetID() Method { return rbd("get_id", nil) }

// SetID is rbd.set_id on rbd_id.<name>.
func SetID(id string) Method { return rbd("set_id", args(func(e *denc.Encoder) { e.String(id) })) }

// DirGetID is rbd.dir_get_id.
func DirGetID(name string) Method {
	return rbd("dir_get_id", args(func(e *denc.Encoder) { e.String(name) }))
}

// DirGetName is rbd.dir_get_name.
func DirGetName(id string) Method {
	return rbd("dir_get_name", args(func(e *denc.Encoder) { e.String(id) }))
}

// DirList is rbd.dir_list: up to max names after start.
func DirList(start string, max uint64) Method {
	return rbd("dir_list", args(func(e *denc.Encoder) { e.String(start); e.U64(max) }))
}

// DirEntry is one image of the directory.
type DirEntry struct{ Name, ID string }

// DecodeDirList parses dir_list's reply (a map of name to id), in name
// order.
func DecodeDirList(out []byte) (entries []DirEntry, err error) {
	err = reply("dir_list", out, func(d *denc.Decoder) {
		entries = denc.List(d, "images", 8, func(d *denc.Decoder) DirEntry {
			return DirEntry{Name: d.String("name"), ID: d.String("id")}
		})
	})
	sort.Slice(entries, func(i, j int) bool { return entries[i].Name < entries[j].Name })
	return
}

// DirAddImage is rbd.dir_add_image.
func DirAddImage(name, id string) Method {
	return rbd("dir_add_image", args(func(e *denc.Encoder) { e.String(name); e.String(id) }))
}

// DirRemoveImage is rbd.dir_remove_image.
func DirRemoveImage(name, id string) Method {
	return rbd("dir_remove_image", args(func(e *denc.Encoder) { e.String(name); e.String(id) }))
}

// DirRenameImage is rbd.dir_rename_image.
func DirRenameImage(src, dst, id string) Method {
	return rbd("dir_rename_image", args(func(e *denc.Encoder) { e.String(src); e.String(dst); e.String(id) }))
}
