package denc

import (
	"fmt"
	"strconv"
	"strings"
)

// SnapContext is Ceph's SnapContext, sent with every write: the newest
// snapshot sequence the writer knows and the existing snapshot ids, newest
// first. Encoded as u64 seq and a list of u64 (no envelope).
type SnapContext struct {
	Seq   uint64
	Snaps []uint64
}

// Decode reads a SnapContext.
func (c *SnapContext) Decode(d *Decoder) {
	c.Seq = d.U64("SnapContext seq")
	c.Snaps = List(d, "SnapContext snaps", 8, func(d *Decoder) uint64 { return d.U64("SnapContext snap") })
}

// Encode writes a SnapContext.
func (c SnapContext) Encode(e *Encoder) {
	e.U64(c.Seq)
	PutList(e, c.Snaps, func(e *Encoder, s uint64) { e.U64(s) })
}

// Valid reports whether c is what Ceph accepts: snapshot ids strictly
// decreasing and none newer than Seq.
func (c SnapContext) Valid() bool {
	if len(c.Snaps) > 0 && c.Snaps[0] > c.Seq {
		return false
	}
	for i := 1; i < len(c.Snaps); i++ {
		if c.Snaps[i] >= c.Snaps[i-1] {
			return false
		}
	}
	return true
}

// String formats c like Ceph: "seq=[s1,s2]" in hex.
func (c SnapContext) String() string {
	parts := make([]string, len(c.Snaps))
	for i, s := range c.Snaps {
		parts[i] = strconv.FormatUint(s, 16)
	}
	return fmt.Sprintf("%x=[%s]", c.Seq, strings.Join(parts, ","))
}
