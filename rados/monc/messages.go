package monc

import "github.com/purerbd/purerbd/rados/denc"

// Message types of the monitor protocol (CEPH_MSG_*, MSG_*).
const (
	msgMonMap             = 4
	msgMonGetOSDMap       = 6
	msgMonSubscribe       = 15
	msgMonSubscribeAck    = 16
	msgAuth               = 17
	msgAuthReply          = 18
	msgMonGetVersion      = 19
	msgMonGetVersionReply = 20
	msgMonCommand         = 50
	msgMonCommandAck      = 51
	msgConfig             = 62

	// MsgOSDMap is CEPH_MSG_OSD_MAP: the MOSDMap messages a subscription
	// delivers, for the next layer to decode.
	MsgOSDMap = 41
)

// paxosHeaderLen is the size of the PaxosServiceMessage header that
// MMonCommand, MMonCommandAck, MAuth and MMonGetOSDMap start with:
// version (u64), session_mon (s16), session_mon_tid (u64).
const paxosHeaderLen = 8 + 2 + 8

// encodePaxosHeader writes a client's PaxosServiceMessage header: the
// version it has (0 for none), no forwarding monitor.
func encodePaxosHeader(e *denc.Encoder, version uint64) {
	e.U64(version)
	e.I16(-1)
	e.U64(0)
}

// decodePaxosHeader reads the header and returns its version.
func decodePaxosHeader(d *denc.Decoder) uint64 {
	v := d.U64("paxos version")
	d.I16("paxos session_mon")
	d.U64("paxos session_mon_tid")
	return v
}
