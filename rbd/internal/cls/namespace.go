package cls

import "github.com/purerbd/purerbd/rados/denc"

// NamespaceAdd is rbd.namespace_add on the pool's rbd_namespace object
// (EEXIST when the namespace exists).
func NamespaceAdd(name string) Method {
	return rbd("namespace_add", args(func(e *denc.Encoder) { e.String(name) }))
}

// NamespaceRemove is rbd.namespace_remove (ENOENT when there is no such
// namespace).
func NamespaceRemove(name string) Method {
	return rbd("namespace_remove", args(func(e *denc.Encoder) { e.String(name) }))
}

// NamespaceList is rbd.namespace_list: up to max names after start.
func NamespaceList(start string, max uint64) Method {
	return rbd("namespace_list", args(func(e *denc.Encoder) { e.String(start); e.U64(max) }))
}

// DecodeNamespaceList parses namespace_list's reply, in name order.
func DecodeNamespaceList(out []byte) (names []string, err error) {
	err = reply("namespace_list", out, func(d *denc.Decoder) { names = denc.List(d, "namespaces", 4, str) })
	return
}

// DirectoryState is cls::rbd::DirectoryState: whether images may be
// added to a directory.
type DirectoryState uint8

// The directory states.
const (
	DirectoryReady       DirectoryState = 0
	DirectoryAddDisabled DirectoryState = 1
)

// DirStateSet is rbd.dir_state_set on rbd_directory (EBUSY when it is
// set to DirectoryAddDisabled on a directory that lists images).
func DirStateSet(state DirectoryState) Method {
	return rbd("dir_state_set", args(func(e *denc.Encoder) { e.U8(uint8(state)) }))
}

// MirrorModeGet is rbd.mirror_mode_get on rbd_mirroring (ENOENT: never
// set, mirroring disabled).
func MirrorModeGet() Method { return rbd("mirror_mode_get", nil) }

// DecodeMirrorModeGet parses mirror_mode_get's reply (0: disabled,
// 1: image, 2: pool).
func DecodeMirrorModeGet(out []byte) (mode uint32, err error) {
	err = reply("mirror_mode_get", out, func(d *denc.Decoder) { mode = d.U32("mirror_mode") })
	return
}
