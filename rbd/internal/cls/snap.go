package cls

import "github.com/purerbd/purerbd/rados/denc"

// Snapshot methods on an image's header.

// SnapshotAdd is rbd.snapshot_add. The snapshot id comes from the pool
// (a self-managed snapshot id allocated beforehand).
func SnapshotAdd(id uint64, name string, ns SnapshotNamespace) Method {
	return rbd("snapshot_add", args(func(e *denc.Encoder) {
		e.String(name)
		e.U64(id)
		ns.Encode(e)
	}))
}

// SnapshotRemove is rbd.snapshot_remove.
func SnapshotRemove(id uint64) Method {
	return rbd("snapshot_remove", args(func(e *denc.Encoder) { e.U64(id) }))
}

// SnapshotRename is rbd.snapshot_rename.
func SnapshotRename(id uint64, newName string) Method {
	return rbd("snapshot_rename", args(func(e *denc.Encoder) { e.U64(id); e.String(newName) }))
}

// SnapshotTrashAdd is rbd.snapshot_trash_add.
func SnapshotTrashAdd(id uint64) Method {
	return rbd("snapshot_trash_add", args(func(e *denc.Encoder) { e.U64(id) }))
}

// SnapshotGet is rbd.snapshot_get.
func SnapshotGet(id uint64) Method {
	return rbd("snapshot_get", args(func(e *denc.Encoder) { e.U64(id) }))
}

// DecodeSnapshotGet parses snapshot_get's reply.
func DecodeSnapshotGet(out []byte) (info SnapshotInfo, err error) {
	err = reply("snapshot_get", out, func(d *denc.Decoder) { info.Decode(d) })
	return
}

// GetSnapshotName is rbd.get_snapshot_name.
func GetSnapshotName(id uint64) Method {
	return rbd("get_snapshot_name", args(func(e *denc.Encoder) { e.U64(id) }))
}

// GetSnapshotTimestamp is rbd.get_snapshot_timestamp.
func GetSnapshotTimestamp(id uint64) Method {
	return rbd("get_snapshot_timestamp", args(func(e *denc.Encoder) { e.U64(id) }))
}

// GetProtectionStatus is rbd.get_protection_status.
func GetProtectionStatus(id uint64) Method {
	return rbd("get_protection_status", args(func(e *denc.Encoder) { e.U64(id) }))
}

// DecodeGetProtectionStatus parses get_protection_status's reply.
func DecodeGetProtectionStatus(out []byte) (status uint8, err error) {
	err = reply("get_protection_status", out, func(d *denc.Decoder) { status = d.U8("protection_status") })
	return
}

// SetProtectionStatus is rbd.set_protection_status.
func SetProtectionStatus(id uint64, status uint8) Method {
	return rbd("set_protection_status", args(func(e *denc.Encoder) { e.U64(id); e.U8(status) }))
}

// SnapshotGetLimit is rbd.snapshot_get_limit.
func SnapshotGetLimit() Method { return rbd("snapshot_get_limit", nil) }

// SnapshotSetLimit is rbd.snapshot_set_limit.
func SnapshotSetLimit(limit uint64) Method {
	return rbd("snapshot_set_limit", args(func(e *denc.Encoder) { e.U64(limit) }))
}
