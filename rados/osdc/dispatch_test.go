package osdc

import (
	"testing"

	"github.com/purerbd/purerbd/rados/msgr"
)

// TestDispatchOrder: a reply is handled on the reader only while no
// message queued before it for the session's goroutine is unhandled;
// otherwise it is queued behind them. A reply that does not decode is
// queued, for the session to report.
func TestDispatchOrder(t *testing.T) {
	o, err := New(Config{Auth: unusedAuth{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { o.Close() })
	s := newSession(o, 0)
	op := &op{o: o, tid: 7, done: make(chan struct{}), sess: s, attempts: 1}
	s.ops[op.tid] = op
	reply := (&MOSDOpReply{Tid: op.tid, RetryAttempt: 0, Ops: []OSDOp{{Code: OpRead}}}).Message()
	finished := func() bool {
		select {
		case <-op.done:
			return true
		default:
			return false
		}
	}

	d := &dispatch{s: s}
	if d.intercept(&msgr.Message{Type: MsgOSDMap}) {
		t.Fatal("an OSD map was taken on the reader")
	}
	if d.intercept(reply) {
		t.Fatal("a reply was taken on the reader with a map queued before it")
	}
	if finished() || d.queued.Load() != 2 {
		t.Fatalf("after a queued map and reply: finished %v, queued %d; want false, 2", finished(), d.queued.Load())
	}
	d.handled()
	if d.intercept(reply) {
		t.Fatal("a reply was taken on the reader with a reply queued before it")
	}
	d.handled()
	d.handled()
	if d.intercept(&msgr.Message{Type: MsgOSDOpReply, Version: 8, Front: []byte{1, 2, 3}}) {
		t.Fatal("a reply that does not decode was taken on the reader")
	}
	d.handled()
	if !d.intercept(reply) {
		t.Fatal("a reply with nothing queued before it was not taken on the reader")
	}
	if !finished() || d.queued.Load() != 0 {
		t.Fatalf("after the reply taken: finished %v, queued %d; want true, 0", finished(), d.queued.Load())
	}
	if s.lookupOp(op.tid) != nil {
		t.Fatal("the finished request is still attached to its session")
	}
}
