package nbd

import (
	"encoding/binary"
	"sync"
	"testing"

	"github.com/purerbd/purerbd/internal/syncbuf"
)

// TestReplyWriterSendsDirectlyWhenIdle: a reply sent alone that finds the
// writer idle is on the wire when send returns, written by the sending
// goroutine (no writer goroutine runs here); one that finds replies
// queued, or is not alone, waits for the writer goroutine.
func TestReplyWriterSendsDirectlyWhenIdle(t *testing.T) {
	var out syncbuf.Buffer
	var recycled int
	rw := &replyWriter{w: newConnWriter(&out, nil), in: make(chan *reply, 4), done: make(chan struct{}),
		recycle: func(*reply) { recycled++ }, fail: func(err error) { t.Errorf("write failed: %v", err) }}
	r := new(reply)
	r.simple(7, 0)
	rw.send(r, true)
	if got := len(out.String()); got != simpleReplyLen || recycled != 1 {
		t.Fatalf("idle writer: %d bytes on the wire and %d recycled after send, want %d and 1", got, recycled, simpleReplyLen)
	}

	// with a reply queued, the next one queues behind it; one with
	// other requests in flight queues for the writer's batch
	q1, q2, q3 := new(reply), new(reply), new(reply)
	q1.simple(8, 0)
	q2.simple(9, 0)
	q3.simple(10, 0)
	rw.in <- q1
	rw.send(q2, true)
	if got := len(out.String()); got != simpleReplyLen || len(rw.in) != 2 {
		t.Fatalf("busy writer: %d bytes on the wire, %d queued, want %d and 2", got, len(rw.in), simpleReplyLen)
	}
	close(rw.in)
	rw.run()
	rw.in, rw.done = make(chan *reply, 4), make(chan struct{})
	rw.send(q3, false)
	if got := len(out.String()); got != 3*simpleReplyLen || len(rw.in) != 1 {
		t.Fatalf("not alone: %d bytes on the wire, %d queued, want %d and 1", got, len(rw.in), 3*simpleReplyLen)
	}
	close(rw.in)
	rw.run()
	if got := cookies(t, []byte(out.String())); len(got) != 4 || got[0] != 7 || got[1] != 8 || got[2] != 9 || got[3] != 10 {
		t.Fatalf("cookies on the wire %v, want [7 8 9 10]", got)
	}
}

// TestReplyWriterConcurrentSends: replies sent from many goroutines, some
// written directly and some by the writer goroutine, each arrive whole.
func TestReplyWriterConcurrentSends(t *testing.T) {
	var out syncbuf.Buffer
	var mu sync.Mutex
	recycled := 0
	rw := &replyWriter{w: newConnWriter(&out, nil), in: make(chan *reply, 64), done: make(chan struct{}),
		recycle: func(*reply) { mu.Lock(); recycled++; mu.Unlock() }, fail: func(err error) { t.Errorf("write failed: %v", err) }}
	go rw.run()
	const senders, each = 16, 200
	var wg sync.WaitGroup
	for g := range senders {
		wg.Go(func() {
			for i := range each {
				r := new(reply)
				r.simple(uint64(g*each+i), 0)
				rw.send(r, i%2 == 0)
			}
		})
	}
	wg.Wait()
	close(rw.in)
	<-rw.done
	seen := map[uint64]bool{}
	for _, c := range cookies(t, []byte(out.String())) {
		if seen[c] {
			t.Fatalf("cookie %d twice", c)
		}
		seen[c] = true
	}
	if len(seen) != senders*each || recycled != senders*each {
		t.Fatalf("%d replies on the wire, %d recycled, want %d", len(seen), recycled, senders*each)
	}
}

// cookies parses a stream of simple replies.
func cookies(t *testing.T, b []byte) []uint64 {
	t.Helper()
	var out []uint64
	for len(b) > 0 {
		if len(b) < simpleReplyLen || binary.BigEndian.Uint32(b) != magicSimpleReply {
			t.Fatalf("not a simple reply: % x", b[:min(len(b), simpleReplyLen)])
		}
		out = append(out, binary.BigEndian.Uint64(b[8:]))
		b = b[simpleReplyLen:]
	}
	return out
}
