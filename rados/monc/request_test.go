package monc

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/purerbd/purerbd/rados/denc"
	"github.com/purerbd/purerbd/rados/msgr"
)

// Pool operations, which monc itself does not know: the test sends them
// through Request as the rados package does.
const (
	testMsgPoolOpReply            = 48
	testMsgPoolOp                 = 49
	testPoolOpCreateUnmanagedSnap = 0x21
	missingPool                   = 987654
)

// poolOpMessage builds an MPoolOp v4.
func poolOpMessage(fsid denc.UUID, pool int64, op uint32) *msgr.Message {
	e := denc.NewEncoder(nil)
	denc.EncodePaxosHeader(e, 0)
	fsid.Encode(e)
	e.U32(uint32(pool))
	e.U32(op)
	e.U64(0)     // auid
	e.U64(0)     // snapid
	e.String("") // name
	e.U8(0)      // pad
	e.I16(0)     // crush_rule
	return &msgr.Message{Type: testMsgPoolOp, Version: 4, CompatVersion: 2, Front: e.Bytes()}
}

// poolOpCode returns the reply code of an MPoolOpReply.
func poolOpCode(m *msgr.Message) (int32, error) {
	if m.Type != testMsgPoolOpReply {
		return 0, fmt.Errorf("reply of type %d, want %d", m.Type, testMsgPoolOpReply)
	}
	d := denc.NewDecoder(m.Front)
	denc.DecodePaxosHeader(d)
	var fsid denc.UUID
	fsid.Decode(d)
	code := d.I32("MPoolOpReply replyCode")
	return code, d.Err()
}

// askMissingPool sends a pool operation on a pool that does not exist
// and checks that the monitor's answer, ENOENT, comes back.
func askMissingPool(ctx context.Context, c *Client) error {
	rep, err := c.Request(ctx, poolOpMessage(c.FSID(), missingPool, testPoolOpCreateUnmanagedSnap), testMsgPoolOpReply)
	if err != nil {
		return err
	}
	code, err := poolOpCode(rep)
	if err != nil {
		return err
	}
	if code != -int32(syscall.ENOENT) {
		return fmt.Errorf("reply code %d, want ENOENT", code)
	}
	return nil
}

// TestRequest sends pool operations, which the client knows nothing
// about, over its session and gets each one's reply by tid, also with
// many at once; replies the client consumes itself are refused.
func TestRequest(t *testing.T) {
	cl := sharedCluster(t)
	c := connect(t, adminConfig(t, cl))
	ctx := testContext(t, 30*time.Second)
	m := poolOpMessage(c.FSID(), missingPool, testPoolOpCreateUnmanagedSnap)
	m.Tid = 12345
	rep, err := c.Request(ctx, m, testMsgPoolOpReply)
	if err != nil {
		t.Fatal(err)
	}
	if code, err := poolOpCode(rep); err != nil || code != -int32(syscall.ENOENT) {
		t.Errorf("reply code %d (%v), want ENOENT", code, err)
	}
	if m.Tid != 12345 || m.Seq != 0 {
		t.Errorf("Request changed the caller's message: tid %d seq %d", m.Tid, m.Seq)
	}
	if rep.Tid == 12345 {
		t.Errorf("the caller's tid went out; the client must choose it")
	}

	var wg sync.WaitGroup
	errs := make(chan error, 32)
	for i := 0; i < cap(errs); i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- askMissingPool(ctx, c)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}

	for _, typ := range []uint16{msgMonMap, MsgOSDMap, msgAuthReply, msgMonGetVersionReply, msgMonSubscribeAck, msgConfig} {
		if _, err := c.Request(ctx, m, typ); err == nil {
			t.Errorf("Request waiting for type %d was accepted", typ)
		}
	}
	// a request that times out is forgotten
	short, cancel := context.WithTimeout(ctx, time.Nanosecond)
	defer cancel()
	<-short.Done()
	if _, err := c.Request(short, m, testMsgPoolOpReply); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("request with an expired context: %v", err)
	}
	c.mu.Lock()
	left := len(c.requests)
	c.mu.Unlock()
	if left != 0 {
		t.Errorf("%d requests still registered", left)
	}
	c.Close()
	if _, err := c.Request(ctx, m, testMsgPoolOpReply); !errors.Is(err, ErrClosed) {
		t.Errorf("request after Close: %v", err)
	}
}
