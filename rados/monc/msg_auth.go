package monc

import (
	"fmt"

	"github.com/purerbd/purerbd/rados/denc"
)

// encodeAuth builds the front of an MAuth carrying an auth payload (a
// cephx ticket renewal) over an established monitor session.
func encodeAuth(protocol uint32, payload []byte, monmapEpoch uint32) []byte {
	e := denc.NewEncoder(make([]byte, 0, denc.PaxosHeaderLen+12+len(payload)))
	denc.EncodePaxosHeader(e, 0)
	e.U32(protocol)
	e.Blob(payload)
	e.U32(monmapEpoch)
	return e.Bytes()
}

// authReply is MAuthReply: the monitor's answer to an MAuth.
type authReply struct {
	protocol uint32
	result   int32 // 0 or a negative errno
	globalID uint64
	payload  []byte // the auth method's reply
	msg      string // a message explaining a failure
}

// decodeAuthReply parses the front of an MAuthReply. payload aliases b.
func decodeAuthReply(b []byte) (authReply, error) {
	var r authReply
	d := denc.NewDecoder(b)
	r.protocol = d.U32("MAuthReply protocol")
	r.result = d.I32("MAuthReply result")
	r.globalID = d.U64("MAuthReply global_id")
	r.payload = d.Blob("MAuthReply result_bl")
	r.msg = d.String("MAuthReply result_msg")
	if err := d.Err(); err != nil {
		return authReply{}, fmt.Errorf("monc: MAuthReply: %w", err)
	}
	return r, nil
}
