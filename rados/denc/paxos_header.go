package denc

// PaxosHeaderLen is the size of the header every PaxosServiceMessage
// starts with (the messages of the monitors' services: MMonCommand,
// MAuth, MGetPoolStats, MPoolOp, …): version (u64), session_mon (s16),
// session_mon_tid (u64).
const PaxosHeaderLen = 8 + 2 + 8

// EncodePaxosHeader writes a client's PaxosServiceMessage header: the
// version it has (0 for none), no forwarding monitor.
func EncodePaxosHeader(e *Encoder, version uint64) {
	e.U64(version)
	e.I16(-1)
	e.U64(0)
}

// DecodePaxosHeader reads a PaxosServiceMessage header and returns its
// version.
func DecodePaxosHeader(d *Decoder) uint64 {
	v := d.U64("paxos version")
	d.I16("paxos session_mon")
	d.U64("paxos session_mon_tid")
	return v
}
