package denc

import "fmt"

// ReqID is Ceph's osd_reqid_t: the identity of a client request, used by
// OSDs to detect resent operations: the client's entity name, its
// per-session transaction id and its incarnation. Versioned 2,2.
type ReqID struct {
	Name EntityName
	Tid  uint64
	Inc  int32
}

// Decode reads an osd_reqid_t.
func (r *ReqID) Decode(d *Decoder) {
	d.VersionedLegacy("osd_reqid_t", 2, 2, 2, 0, func(d *Decoder, _ uint8) {
		r.Name.Decode(d)
		r.Tid = d.U64("osd_reqid_t tid")
		r.Inc = d.I32("osd_reqid_t inc")
	})
}

// Encode writes an osd_reqid_t.
func (r ReqID) Encode(e *Encoder) {
	e.Versioned(2, 2, func(e *Encoder) {
		r.Name.Encode(e)
		e.U64(r.Tid)
		e.I32(r.Inc)
	})
}

// String returns "name.inc:tid", as Ceph prints it.
func (r ReqID) String() string { return fmt.Sprintf("%s.%d:%d", r.Name, r.Inc, r.Tid) }
