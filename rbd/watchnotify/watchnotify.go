// Package watchnotify encodes the messages librbd clients exchange through
// watch/notify on an image's header object: lock handover (ACQUIRED_LOCK,
// RELEASED_LOCK, REQUEST_LOCK), HEADER_UPDATE, and requests asking the
// lock owner to run a maintenance operation, plus the response a watcher
// attaches to its notify acknowledgement.
package watchnotify

import (
	"fmt"

	"github.com/purerbd/purerbd/rados/denc"
	"github.com/purerbd/purerbd/rbd/internal/cls"
)

// Op is librbd's NotifyOp.
type Op uint32

// Notify operations.
const (
	OpAcquiredLock     Op = 0
	OpReleasedLock     Op = 1
	OpRequestLock      Op = 2
	OpHeaderUpdate     Op = 3
	OpAsyncProgress    Op = 4
	OpAsyncComplete    Op = 5
	OpFlatten          Op = 6
	OpResize           Op = 7
	OpSnapCreate       Op = 8
	OpSnapRemove       Op = 9
	OpRebuildObjectMap Op = 10
	OpSnapRename       Op = 11
	OpSnapProtect      Op = 12
	OpSnapUnprotect    Op = 13
	OpRename           Op = 14
	OpUpdateFeatures   Op = 15
	OpMigrate          Op = 16
	OpSparsify         Op = 17
	OpQuiesce          Op = 18
	OpUnquiesce        Op = 19
	OpMetadataUpdate   Op = 20
)

var opNames = map[Op]string{
	OpAcquiredLock: "AcquiredLock", OpReleasedLock: "ReleasedLock", OpRequestLock: "RequestLock",
	OpHeaderUpdate: "HeaderUpdate", OpAsyncProgress: "AsyncProgress", OpAsyncComplete: "AsyncComplete",
	OpFlatten: "Flatten", OpResize: "Resize", OpSnapCreate: "SnapCreate", OpSnapRemove: "SnapRemove",
	OpRebuildObjectMap: "RebuildObjectMap", OpSnapRename: "SnapRename", OpSnapProtect: "SnapProtect",
	OpSnapUnprotect: "SnapUnprotect", OpRename: "Rename", OpUpdateFeatures: "UpdateFeatures",
	OpMigrate: "Migrate", OpSparsify: "Sparsify", OpQuiesce: "Quiesce", OpUnquiesce: "Unquiesce",
	OpMetadataUpdate: "MetadataUpdate",
}

func (o Op) String() string {
	if n, ok := opNames[o]; ok {
		return n
	}
	return fmt.Sprintf("Unknown (%d)", uint32(o))
}

// ClientID names a librbd client: its RADOS global id and the handle
// (cookie) of its header watch.
type ClientID struct {
	GID    uint64
	Handle uint64
}

// IsZero reports whether c is unset.
func (c ClientID) IsZero() bool { return c == ClientID{} }

func (c ClientID) String() string { return fmt.Sprintf("[%d,%d]", c.GID, c.Handle) }

func (c *ClientID) decode(d *denc.Decoder) {
	c.GID = d.U64("client gid")
	c.Handle = d.U64("client handle")
}

func (c ClientID) encode(e *denc.Encoder) { e.U64(c.GID); e.U64(c.Handle) }

// AsyncRequestID names one maintenance request.
type AsyncRequestID struct {
	Client    ClientID
	RequestID uint64
}

func (a *AsyncRequestID) decode(d *denc.Decoder) {
	a.Client.decode(d)
	a.RequestID = d.U64("request_id")
}

func (a AsyncRequestID) encode(e *denc.Encoder) { a.Client.encode(e); e.U64(a.RequestID) }

// Version is the NotifyMessage version this package writes (Pacific and
// newer write 7).
const Version = 7

// NotifyMessage is librbd's watch_notify::NotifyMessage. Which fields
// are meaningful depends on Op.
type NotifyMessage struct {
	Op Op
	// Client: AcquiredLock, ReleasedLock, RequestLock.
	Client ClientID
	// Force: RequestLock.
	Force bool
	// Async: every maintenance request and its progress/completion.
	Async AsyncRequestID
	// Offset, Total: AsyncProgress.
	Offset, Total uint64
	// Result: AsyncComplete.
	Result int32
	// Size, AllowShrink: Resize.
	Size        uint64
	AllowShrink bool
	// SnapName, SnapNamespace: snapshot operations; SnapID: SnapRename;
	// Flags: SnapCreate.
	SnapName      string
	SnapNamespace cls.SnapshotNamespace
	SnapID        uint64
	Flags         uint64
	// ImageName: Rename.
	ImageName string
	// Features, Enabled: UpdateFeatures.
	Features uint64
	Enabled  bool
	// SparseSize: Sparsify.
	SparseSize uint64
	// Key, Value: MetadataUpdate (Value nil: key removed).
	Key   string
	Value *string
	// Unknown is the payload of an op this package does not know.
	Unknown []byte
	// Version is the version read (Encode always writes Version).
	Version uint8
}

// Decode reads a NotifyMessage of any version.
func (m *NotifyMessage) Decode(d *denc.Decoder) {
	*m = NotifyMessage{}
	m.Version = d.Versioned("NotifyMessage", 1, func(d *denc.Decoder, v uint8) {
		m.Op = Op(d.U32("notify_op"))
		m.decodePayload(d, v)
	})
}

func (m *NotifyMessage) decodePayload(d *denc.Decoder, v uint8) {
	async := func() {
		if v >= 7 {
			m.Async.decode(d)
		}
	}
	snap := func() {
		m.SnapName = d.String("snap_name")
		if v >= 6 {
			m.SnapNamespace.Decode(d)
		}
	}
	switch m.Op {
	case OpAcquiredLock, OpReleasedLock:
		if v >= 2 {
			m.Client.decode(d)
		}
	case OpRequestLock:
		if v >= 2 {
			m.Client.decode(d)
		}
		if v >= 3 {
			m.Force = d.Bool("force")
		}
	case OpHeaderUpdate:
	case OpAsyncProgress:
		m.Async.decode(d)
		m.Offset = d.U64("offset")
		m.Total = d.U64("total")
	case OpAsyncComplete:
		m.Async.decode(d)
		m.Result = d.I32("result")
	case OpFlatten, OpRebuildObjectMap, OpMigrate, OpQuiesce, OpUnquiesce:
		m.Async.decode(d)
	case OpResize:
		m.Size = d.U64("size")
		m.Async.decode(d)
		if v >= 4 {
			m.AllowShrink = d.Bool("allow_shrink")
		}
	case OpSnapCreate:
		snap()
		if v == 5 {
			m.SnapNamespace.Decode(d)
		}
		if v >= 7 {
			m.Async.decode(d)
			m.Flags = d.U64("flags")
		}
	case OpSnapRemove, OpSnapProtect, OpSnapUnprotect:
		snap()
		async()
	case OpSnapRename:
		m.SnapID = d.U64("snap_id")
		snap()
		async()
	case OpRename:
		m.ImageName = d.String("image_name")
		async()
	case OpUpdateFeatures:
		m.Features = d.U64("features")
		m.Enabled = d.Bool("enabled")
		async()
	case OpSparsify:
		m.Async.decode(d)
		m.SparseSize = d.U64("sparse_size")
	case OpMetadataUpdate:
		m.Key = d.String("key")
		if s, ok := denc.Optional(d, "value", str); ok {
			m.Value = &s
		}
		async()
	default:
		m.Unknown = append([]byte(nil), d.Rest()...)
		d.Skip("unknown payload", len(m.Unknown))
	}
}

func str(d *denc.Decoder) string { return d.String("value") }

// Encode writes m as version 7 (compat 1).
func (m NotifyMessage) Encode(e *denc.Encoder) {
	e.Versioned(Version, 1, func(e *denc.Encoder) {
		e.U32(uint32(m.Op))
		snap := func() {
			e.String(m.SnapName)
			m.SnapNamespace.Encode(e)
		}
		switch m.Op {
		case OpAcquiredLock, OpReleasedLock:
			m.Client.encode(e)
		case OpRequestLock:
			m.Client.encode(e)
			e.Bool(m.Force)
		case OpHeaderUpdate:
		case OpAsyncProgress:
			m.Async.encode(e)
			e.U64(m.Offset)
			e.U64(m.Total)
		case OpAsyncComplete:
			m.Async.encode(e)
			e.I32(m.Result)
		case OpFlatten, OpRebuildObjectMap, OpMigrate, OpQuiesce, OpUnquiesce:
			m.Async.encode(e)
		case OpResize:
			e.U64(m.Size)
			m.Async.encode(e)
			e.Bool(m.AllowShrink)
		case OpSnapCreate:
			snap()
			m.Async.encode(e)
			e.U64(m.Flags)
		case OpSnapRemove, OpSnapProtect, OpSnapUnprotect:
			snap()
			m.Async.encode(e)
		case OpSnapRename:
			e.U64(m.SnapID)
			snap()
			m.Async.encode(e)
		case OpRename:
			e.String(m.ImageName)
			m.Async.encode(e)
		case OpUpdateFeatures:
			e.U64(m.Features)
			e.Bool(m.Enabled)
			m.Async.encode(e)
		case OpSparsify:
			m.Async.encode(e)
			e.U64(m.SparseSize)
		case OpMetadataUpdate:
			e.String(m.Key)
			if m.Value == nil {
				e.Bool(false)
			} else {
				e.Bool(true)
				e.String(*m.Value)
			}
			m.Async.encode(e)
		default:
			e.Raw(m.Unknown)
		}
	})
}

// Marshal encodes m.
func (m NotifyMessage) Marshal() []byte {
	e := denc.NewEncoder(nil)
	m.Encode(e)
	return e.Bytes()
}

// ParseNotify decodes a notification payload. An empty payload is the
// legacy form of HeaderUpdate, as librbd treats it.
func ParseNotify(p []byte) (NotifyMessage, error) {
	if len(p) == 0 {
		return NotifyMessage{Op: OpHeaderUpdate}, nil
	}
	d := denc.NewDecoder(p)
	var m NotifyMessage
	m.Decode(d)
	d.End("NotifyMessage")
	if err := d.Err(); err != nil {
		return NotifyMessage{}, fmt.Errorf("watchnotify: %w", err)
	}
	return m, nil
}

// ResponseMessage is what a watcher attaches to its acknowledgement of a
// request: a negative errno or 0.
type ResponseMessage struct {
	Result int32
}

// Decode reads a ResponseMessage.
func (r *ResponseMessage) Decode(d *denc.Decoder) {
	d.Versioned("ResponseMessage", 1, func(d *denc.Decoder, _ uint8) { r.Result = d.I32("result") })
}

// Encode writes a ResponseMessage.
func (r ResponseMessage) Encode(e *denc.Encoder) {
	e.Versioned(1, 1, func(e *denc.Encoder) { e.I32(r.Result) })
}

// Marshal encodes r.
func (r ResponseMessage) Marshal() []byte {
	e := denc.NewEncoder(nil)
	r.Encode(e)
	return e.Bytes()
}

// ParseResponse decodes a watcher's acknowledgement payload.
func ParseResponse(p []byte) (ResponseMessage, error) {
	d := denc.NewDecoder(p)
	var r ResponseMessage
	r.Decode(d)
	d.End("ResponseMessage")
	if err := d.Err(); err != nil {
		return ResponseMessage{}, fmt.Errorf("watchnotify: %w", err)
	}
	return r, nil
}
