package denc

// PoolSnapInfo is Ceph's pool_snap_info_t: one pool-level snapshot in a
// pool's snaps map. Versioned 2,2; version 1 had no envelope length.
type PoolSnapInfo struct {
	SnapID uint64
	Stamp  UTime
	Name   string
}

// MinPoolSnapInfoLen is the smallest encoding of a pool_snap_info_t: a
// version 1 (no compat, no length) with its snap id, stamp and an empty
// name.
const MinPoolSnapInfoLen = 1 + 8 + 8 + 4

// Decode reads a pool_snap_info_t.
func (p *PoolSnapInfo) Decode(d *Decoder) {
	d.VersionedLegacy("pool_snap_info_t", 2, 2, 2, 0, func(d *Decoder, _ uint8) {
		p.SnapID = d.U64("pool_snap_info_t snapid")
		p.Stamp.Decode(d)
		p.Name = d.String("pool_snap_info_t name")
	})
}

// Encode writes a pool_snap_info_t.
func (p PoolSnapInfo) Encode(e *Encoder) {
	e.Versioned(2, 2, func(e *Encoder) {
		e.U64(p.SnapID)
		p.Stamp.Encode(e)
		e.String(p.Name)
	})
}
