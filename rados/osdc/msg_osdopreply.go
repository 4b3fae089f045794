package osdc

import (
	"fmt"

	"github.com/purerbd/purerbd/rados/denc"
	"github.com/purerbd/purerbd/rados/msgr"
)

// MOSDOpReply is an OSD's answer to an MOSDOp (CEPH_MSG_OSD_OPREPLY).
// Versions 2 to 8 are decoded; Pacific and newer OSDs send 8 to clients
// with this package's features.
type MOSDOpReply struct {
	Tid              uint64
	OID              string
	PGID             denc.PG
	Flags            uint64
	Result           int32 // 0 or a negative errno
	BadReplayVersion denc.EVersion
	Epoch            uint32 // the OSD's map epoch
	// Ops echo the request's operations with each one's RVal and
	// OutData.
	Ops          []OSDOp
	RetryAttempt int32 // the attempt answered; -1 if the OSD did not say
	// ReplayVersion is the version the write created; UserVersion the
	// object's user-visible version after the request.
	ReplayVersion denc.EVersion
	UserVersion   uint64
	// Redirect, when not nil, tells the client to resend the request to
	// another object or pool.
	Redirect *Redirect

	one [1]OSDOp // Ops of a single-operation reply
}

// Redirect is request_redirect_t: where to resend a request.
type Redirect struct {
	Oloc denc.ObjectLocator
	OID  string // empty: keep the name
}

func (r *Redirect) decode(d *denc.Decoder) {
	d.Versioned("request_redirect_t", 1, func(d *denc.Decoder, _ uint8) {
		r.Oloc.Decode(d)
		r.OID = d.String("request_redirect_t object")
		d.Blob("request_redirect_t osd_instructions")
	})
}

func (r *Redirect) encode(e *denc.Encoder) {
	e.Versioned(1, 1, func(e *denc.Encoder) {
		r.Oloc.Encode(e)
		e.String(r.OID)
		e.U32(0)
	})
}

// maxReplyOps bounds the op count of a reply before allocating.
const maxReplyOps = 1024

// DecodeOSDOpReply decodes an MOSDOpReply. OutData slices alias
// msg.Data.
func DecodeOSDOpReply(msg *msgr.Message) (*MOSDOpReply, error) {
	if msg.Type != MsgOSDOpReply {
		return nil, fmt.Errorf("osdc: message type %d is not MOSDOpReply", msg.Type)
	}
	v := msg.Version
	if v < 2 {
		return nil, fmt.Errorf("osdc: MOSDOpReply version %d is too old", v)
	}
	r := &MOSDOpReply{Tid: msg.Tid, RetryAttempt: -1}
	d := denc.NewDecoder(msg.Front)
	r.OID = d.String("MOSDOpReply oid")
	r.PGID.Decode(d)
	r.Flags = d.U64("MOSDOpReply flags")
	r.Result = d.I32("MOSDOpReply result")
	r.BadReplayVersion.Decode(d)
	r.Epoch = d.U32("MOSDOpReply epoch")
	n := d.Count("MOSDOpReply num_ops", rawOpLen)
	if n > maxReplyOps {
		d.Failf("MOSDOpReply num_ops", "%d ops", n)
	}
	if d.Err() == nil && n > 0 {
		r.Ops = r.one[:]
		if n > 1 {
			r.Ops = make([]OSDOp, n)
		}
		for i := range r.Ops {
			r.Ops[i].decodeRaw(d)
		}
	}
	if v >= 3 {
		r.RetryAttempt = d.I32("MOSDOpReply retry_attempt")
	}
	if v >= 4 {
		for i := range r.Ops {
			r.Ops[i].RVal = d.I32("MOSDOpReply rval")
		}
	}
	if v >= 5 {
		r.ReplayVersion.Decode(d)
		r.UserVersion = d.U64("MOSDOpReply user_version")
	} else {
		r.ReplayVersion = r.BadReplayVersion
		r.UserVersion = r.ReplayVersion.Version
	}
	if v == 6 {
		var red Redirect
		red.decode(d)
		if red.Oloc.Pool != 0 || red.OID != "" || red.Oloc.Namespace != "" || red.Oloc.Key != "" {
			r.Redirect = &red
		}
	}
	if v >= 7 && d.Bool("MOSDOpReply do_redirect") {
		r.Redirect = &Redirect{}
		r.Redirect.decode(d)
	}
	// v8 appends a blkin trace; newer versions more. Nothing after the
	// redirect matters to a client.
	if err := d.Err(); err != nil {
		return nil, fmt.Errorf("osdc: MOSDOpReply: %w", err)
	}
	if v >= 4 {
		if err := splitData(r.Ops, msg.Data, func(o *OSDOp, p []byte) { o.OutData = p }); err != nil {
			return nil, fmt.Errorf("osdc: MOSDOpReply: %w", err)
		}
	}
	return r, nil
}

// Message encodes r as a v8 MOSDOpReply, as an OSD would (for tests and
// fuzz seeds).
func (r *MOSDOpReply) Message() *msgr.Message {
	e := denc.NewEncoder(nil)
	e.String(r.OID)
	r.PGID.Encode(e)
	e.U64(r.Flags)
	e.I32(r.Result)
	r.BadReplayVersion.Encode(e)
	e.U32(r.Epoch)
	e.U32(uint32(len(r.Ops)))
	var data []byte
	for i := range r.Ops {
		r.Ops[i].encodeRaw(e, uint32(len(r.Ops[i].OutData)))
		data = append(data, r.Ops[i].OutData...)
	}
	e.I32(r.RetryAttempt)
	for i := range r.Ops {
		e.I32(r.Ops[i].RVal)
	}
	r.ReplayVersion.Encode(e)
	e.U64(r.UserVersion)
	e.Bool(r.Redirect != nil)
	if r.Redirect != nil {
		r.Redirect.encode(e)
	}
	e.Raw(make([]byte, blkinTraceLen))
	return &msgr.Message{Type: MsgOSDOpReply, Version: 8, CompatVersion: 2, Tid: r.Tid, Front: e.Bytes(), Data: data}
}
