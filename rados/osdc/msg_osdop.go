package osdc

import (
	"fmt"

	"github.com/purerbd/purerbd/rados/denc"
	"github.com/purerbd/purerbd/rados/msgr"
)

// MOSDOp versions: v8 is what every Ceph since Luminous accepts (and
// what Pacific through Reef clients send).
const (
	osdOpVersion       = 8
	osdOpCompatVersion = 3
	// clientOpPriority is osd_client_op_priority, the priority librados
	// gives every MOSDOp.
	clientOpPriority = 63
	// blkinTraceLen is an empty blkin_trace_info (three u64s).
	blkinTraceLen = 24
)

// MOSDOp is a request to an OSD (CEPH_MSG_OSD_OP, v8): a list of
// operations on one object (or, for listing, on one placement group).
type MOSDOp struct {
	Tid uint64 // the message's transaction id

	PGID  denc.SPG // the placement group as the client computed it (folded into pg_num)
	Hash  uint32   // the object's full placement hash
	Epoch uint32   // the client's OSD map epoch
	Flags uint32   // Flag*
	// ReqID is left zero by clients: the OSD then identifies the request
	// by the connection's entity name and Tid.
	ReqID        denc.ReqID
	ClientInc    uint32
	MTime        denc.UTime
	Oloc         denc.ObjectLocator
	OID          string
	Ops          []OSDOp
	SnapID       uint64 // SnapHead, or the snapshot to read
	SnapSeq      uint64 // the writer's snap context
	Snaps        []uint64
	RetryAttempt int32 // 0 on the first send
	Features     uint64
}

// Message encodes m into a message ready to send. The operations' InData
// are laid end to end in the data segment; a single one is not copied.
func (m *MOSDOp) Message() *msgr.Message {
	size := 192 + len(m.OID) + len(m.Oloc.Key) + len(m.Oloc.Namespace) + rawOpLen*len(m.Ops) + 8*len(m.Snaps)
	// a small front is allocated with its message, in one object
	var msg *msgr.Message
	var front []byte
	if size <= smallFront {
		mf := &messageWithFront{}
		msg, front = &mf.msg, mf.front[:0]
	} else {
		msg, front = &msgr.Message{}, make([]byte, 0, size)
	}
	e := denc.NewEncoder(front)
	m.PGID.Encode(e)
	e.U32(m.Hash)
	e.U32(m.Epoch)
	e.U32(m.Flags)
	m.ReqID.Encode(e)
	var trace [blkinTraceLen]byte // an empty blkin trace
	e.Raw(trace[:])
	e.U32(m.ClientInc)
	m.MTime.Encode(e)
	m.Oloc.Encode(e)
	e.String(m.OID)
	e.U16(uint16(len(m.Ops)))
	var data []byte
	var dataOp *OSDOp
	nData, total := 0, 0
	for i := range m.Ops {
		if n := len(m.Ops[i].InData); n > 0 {
			nData++
			total += n
			data, dataOp = m.Ops[i].InData, &m.Ops[i]
		}
	}
	if nData > 1 {
		data = make([]byte, 0, total)
		for i := range m.Ops {
			data = append(data, m.Ops[i].InData...)
		}
	}
	for i := range m.Ops {
		m.Ops[i].encodeRaw(e, uint32(len(m.Ops[i].InData)))
	}
	e.U64(m.SnapID)
	e.U64(m.SnapSeq)
	denc.PutList(e, m.Snaps, func(e *denc.Encoder, s uint64) { e.U64(s) })
	e.I32(m.RetryAttempt)
	e.U64(m.Features)
	*msg = msgr.Message{
		Type:          MsgOSDOp,
		Version:       osdOpVersion,
		CompatVersion: osdOpCompatVersion,
		Priority:      clientOpPriority,
		Tid:           m.Tid,
		Front:         e.Bytes(),
		Data:          data,
	}
	if nData == 1 {
		if dataOp.InDataCRCKnown {
			msg.DataCRC, msg.DataCRCKnown = dataOp.InDataCRC, true
		}
		// the data is the operation's own, which the request keeps
		// until the OSD answered: a large one may go by reference
		// (where Config.SpliceWrites asks for it)
		msg.SpliceData = true
	}
	return msg
}

// smallFront is the most front a message is allocated with (a request
// of one or two ops on an RBD data object needs less).
const smallFront = 384

// messageWithFront is a message and the memory of a small front.
type messageWithFront struct {
	msg   msgr.Message
	front [smallFront]byte
}

// DecodeOSDOp decodes a v8 MOSDOp (what this package sends; used to
// check encodings).
func DecodeOSDOp(msg *msgr.Message) (*MOSDOp, error) {
	if msg.Type != MsgOSDOp {
		return nil, fmt.Errorf("osdc: message type %d is not MOSDOp", msg.Type)
	}
	if msg.Version != osdOpVersion {
		return nil, fmt.Errorf("osdc: MOSDOp version %d: only %d is supported", msg.Version, osdOpVersion)
	}
	m := &MOSDOp{Tid: msg.Tid}
	d := denc.NewDecoder(msg.Front)
	m.PGID.Decode(d)
	m.Hash = d.U32("MOSDOp hash")
	m.Epoch = d.U32("MOSDOp epoch")
	m.Flags = d.U32("MOSDOp flags")
	m.ReqID.Decode(d)
	d.Skip("MOSDOp trace", blkinTraceLen)
	m.ClientInc = d.U32("MOSDOp client_inc")
	m.MTime.Decode(d)
	m.Oloc.Decode(d)
	m.OID = d.String("MOSDOp oid")
	n := int(d.U16("MOSDOp num_ops"))
	if d.Err() == nil && n*rawOpLen > d.Remaining() {
		d.Failf("MOSDOp ops", "%d ops do not fit in %d bytes", n, d.Remaining())
	}
	if d.Err() == nil {
		m.Ops = make([]OSDOp, n)
		for i := range m.Ops {
			m.Ops[i].decodeRaw(d)
		}
	}
	m.SnapID = d.U64("MOSDOp snapid")
	m.SnapSeq = d.U64("MOSDOp snap_seq")
	m.Snaps = denc.List(d, "MOSDOp snaps", 8, func(d *denc.Decoder) uint64 { return d.U64("snap") })
	m.RetryAttempt = d.I32("MOSDOp retry_attempt")
	m.Features = d.U64("MOSDOp features")
	d.End("MOSDOp")
	if err := d.Err(); err != nil {
		return nil, fmt.Errorf("osdc: MOSDOp: %w", err)
	}
	if err := splitData(m.Ops, msg.Data, func(o *OSDOp, p []byte) { o.InData = p }); err != nil {
		return nil, fmt.Errorf("osdc: MOSDOp: %w", err)
	}
	return m, nil
}

// splitData hands each operation its payload_len bytes of the data
// segment, in order.
func splitData(ops []OSDOp, data []byte, set func(o *OSDOp, p []byte)) error {
	off := 0
	for i := range ops {
		n := int(ops[i].payloadLen)
		if n == 0 {
			continue
		}
		if n < 0 || n > len(data)-off {
			return fmt.Errorf("%w: op %d payload of %d bytes, %d left in the data segment",
				denc.ErrShort, i, ops[i].payloadLen, len(data)-off)
		}
		set(&ops[i], data[off:off+n:off+n])
		off += n
	}
	return nil
}
