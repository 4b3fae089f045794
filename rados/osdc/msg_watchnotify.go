package osdc

import (
	"fmt"

	"github.com/purerbd/purerbd/rados/denc"
	"github.com/purerbd/purerbd/rados/msgr"
)

// MWatchNotify is an event an OSD sends a watcher or a notifier
// (CEPH_MSG_WATCH_NOTIFY, v3): a notification to a watch, the
// completion of a notify, or the loss of a watch.
type MWatchNotify struct {
	Opcode      uint8  // WatchEvent*
	Cookie      uint64 // the watch's (or the notify's) cookie
	Ver         uint64 // unused
	NotifyID    uint64
	Payload     []byte // notify: the notifier's payload
	ReturnCode  int32  // completion: 0 or -ETIMEDOUT
	NotifierGID uint64 // notify: the notifier's global id
	// Data is the message's data segment: for a completion, the
	// watchers' acknowledgements (DecodeNotifyAcks).
	Data []byte
}

// DecodeWatchNotify decodes an MWatchNotify. Payload aliases msg.Front,
// Data msg.Data.
func DecodeWatchNotify(msg *msgr.Message) (*MWatchNotify, error) {
	if msg.Type != MsgWatchNotify {
		return nil, fmt.Errorf("osdc: message type %d is not MWatchNotify", msg.Type)
	}
	w := &MWatchNotify{Data: msg.Data}
	d := denc.NewDecoder(msg.Front)
	msgVer := d.U8("MWatchNotify msg_ver")
	w.Opcode = d.U8("MWatchNotify opcode")
	w.Cookie = d.U64("MWatchNotify cookie")
	w.Ver = d.U64("MWatchNotify ver")
	w.NotifyID = d.U64("MWatchNotify notify_id")
	if msgVer >= 1 {
		w.Payload = d.Blob("MWatchNotify payload")
	}
	if msg.Version >= 2 {
		w.ReturnCode = d.I32("MWatchNotify return_code")
	}
	if msg.Version >= 3 {
		w.NotifierGID = d.U64("MWatchNotify notifier_gid")
	}
	if err := d.Err(); err != nil {
		return nil, fmt.Errorf("osdc: MWatchNotify: %w", err)
	}
	return w, nil
}

// Message encodes w as an OSD would (for tests and fuzz seeds).
func (w *MWatchNotify) Message() *msgr.Message {
	e := denc.NewEncoder(nil)
	e.U8(1)
	e.U8(w.Opcode)
	e.U64(w.Cookie)
	e.U64(w.Ver)
	e.U64(w.NotifyID)
	e.Blob(w.Payload)
	e.I32(w.ReturnCode)
	e.U64(w.NotifierGID)
	return &msgr.Message{Type: MsgWatchNotify, Version: 3, CompatVersion: 1, Front: e.Bytes(), Data: w.Data}
}
