package denc

import "strconv"

// EVersion is Ceph's eversion_t: an object or log version, the OSD map
// epoch it was written in plus a counter. Encoded as u64 version then u32
// epoch (no envelope).
type EVersion struct {
	Version uint64
	Epoch   uint32
}

// Decode reads an eversion_t.
func (v *EVersion) Decode(d *Decoder) {
	v.Version = d.U64("eversion_t version")
	v.Epoch = d.U32("eversion_t epoch")
}

// Encode writes an eversion_t.
func (v EVersion) Encode(e *Encoder) {
	e.U64(v.Version)
	e.U32(v.Epoch)
}

// String returns "epoch'version", as Ceph prints it.
func (v EVersion) String() string {
	return strconv.FormatUint(uint64(v.Epoch), 10) + "'" + strconv.FormatUint(v.Version, 10)
}
