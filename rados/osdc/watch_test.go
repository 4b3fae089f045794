package osdc

import (
	"bufio"
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestWatchNotifyWithRadosCLI: a notify from `rados notify` reaches an
// objecter watch (also after its session was reset), and an objecter
// notify reaches `rados watch`.
func TestWatchNotifyWithRadosCLI(t *testing.T) {
	tc := connect(t, cluster, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const oid = "watch-obj"
	if _, err := tc.ob.Do(ctx, &Request{Pool: tc.pool, OID: oid, Ops: []OSDOp{Create(false)}}); err != nil {
		t.Fatal(err)
	}
	w, err := tc.ob.Watch(ctx, WatchRequest{Pool: tc.pool, OID: oid})
	if err != nil {
		t.Fatal(err)
	}
	expectNotify := func(msg string) {
		t.Helper()
		done := make(chan error, 1)
		go func() {
			_, err := cluster.Rados(ctx, "-p", cluster.Pool, "notify", oid, msg)
			done <- err
		}()
		select {
		case ev := <-w.Events():
			if ev.Err != nil {
				t.Fatalf("watch error: %v", ev.Err)
			}
			if !strings.HasSuffix(string(ev.Payload), msg) {
				t.Fatalf("payload %q, want %q", ev.Payload, msg)
			}
			if err := w.Ack(ctx, ev.NotifyID, []byte("ack:"+msg)); err != nil {
				t.Fatalf("ack: %v", err)
			}
		case <-ctx.Done():
			t.Fatal("no notification")
		}
		if err := <-done; err != nil {
			t.Fatalf("rados notify: %v", err)
		}
	}
	expectNotify("first")

	// reset the watch's session: the watch re-registers by itself
	w.l.mu.Lock()
	s := w.l.sess
	w.l.mu.Unlock()
	conn := s.currentConn()
	_ = conn.Close()
	deadline := time.Now().Add(20 * time.Second)
	for {
		w.l.mu.Lock()
		ok := w.l.conn != conn && w.l.conn != nil && !w.l.reconnecting
		w.l.mu.Unlock()
		if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("watch not re-registered after a session reset")
		}
		time.Sleep(20 * time.Millisecond)
	}
	expectNotify("after-reset")
	if err := w.Err(); err != nil {
		t.Fatalf("watch error: %v", err)
	}

	// the other way round: `rados watch` receives our notify and acks it
	cmd := cluster.ToolCommand(ctx, "rados", "-p", cluster.Pool, "watch", oid)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { stdin.Close(); _ = cmd.Wait() }()
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	// wait until rados has registered its watch
	for {
		rep, err := tc.ob.Do(ctx, &Request{Pool: tc.pool, OID: oid, Ops: []OSDOp{ListWatchers()}})
		if err != nil {
			t.Fatal(err)
		}
		ws, _ := ParseWatchers(rep.Ops[0].OutData)
		if len(ws) >= 2 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	go func() {
		// our own watch gets it too; ack it so the notify completes
		for ev := range w.Events() {
			if ev.Err == nil {
				_ = w.Ack(ctx, ev.NotifyID, nil)
			}
		}
	}()
	res, err := tc.ob.Notify(ctx, NotifyRequest{Pool: tc.pool, OID: oid, Payload: []byte("from-purerbd"), Timeout: 10 * time.Second})
	if err != nil {
		t.Fatalf("notify: %v", err)
	}
	if len(res.Acks) != 2 || len(res.TimedOut) != 0 {
		t.Fatalf("notify result: %+v", res)
	}
	got := false
	for !got {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("rados watch exited")
			}
			got = strings.HasPrefix(l, "NOTIFY") // its hexdump of the payload is not flushed
		case <-ctx.Done():
			t.Fatal("rados watch did not report our notify")
		}
	}
	if err := w.Close(ctx); err != nil {
		t.Fatalf("unwatch: %v", err)
	}
}

// TestWatchErrorDelivered: deleting a watched object ends the watch
// with ENOTCONN, delivered on the watcher's channel.
func TestWatchErrorDelivered(t *testing.T) {
	checkGoroutines(t)
	tc := connect(t, cluster, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const oid = "watch-deleted"
	if _, err := tc.ob.Do(ctx, &Request{Pool: tc.pool, OID: oid, Ops: []OSDOp{Create(false)}}); err != nil {
		t.Fatal(err)
	}
	w, err := tc.ob.Watch(ctx, WatchRequest{Pool: tc.pool, OID: oid})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cluster.Rados(ctx, "-p", cluster.Pool, "rm", oid); err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-w.Events():
		if !errors.Is(ev.Err, ENOTCONN) {
			t.Fatalf("event after the object was deleted: %+v", ev)
		}
	case <-ctx.Done():
		t.Fatal("no error after the watched object was deleted")
	}
	if !errors.Is(w.Err(), ENOTCONN) {
		t.Fatalf("Err: %v", w.Err())
	}
	_ = w.Close(ctx)
	if _, ok := <-w.Events(); ok {
		t.Fatal("Events not closed by Close")
	}
}

// TestCloseDuringWatch closes the objecter while watches and notifies
// are being set up and torn down on it: every call returns (a watch, a
// result or ErrClosed), every watch's Events closes, and nothing is left
// running. Run with -race: Close used to read the fields of a new watch
// that Watch was still writing.
func TestCloseDuringWatch(t *testing.T) {
	checkGoroutines(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const oid = "watch-close"
	for round := 0; round < 8; round++ {
		tc := connect(t, cluster, nil)
		if _, err := tc.ob.Do(ctx, &Request{Pool: tc.pool, OID: oid, Ops: []OSDOp{Create(false)}}); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		var done atomic.Int64
		for i := 0; i < 8; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for ; ctx.Err() == nil; done.Add(1) {
					var err error
					if i%4 == 3 {
						_, err = tc.ob.Notify(ctx, NotifyRequest{Pool: tc.pool, OID: oid, Timeout: time.Second})
					} else {
						var w *Watch
						if w, err = tc.ob.Watch(ctx, WatchRequest{Pool: tc.pool, OID: oid}); err == nil {
							_ = w.Close(ctx)
							for range w.Events() {
							}
						}
					}
					if errors.Is(err, ErrClosed) {
						return
					}
					if err != nil {
						t.Errorf("round %d: %v", round, err)
						return
					}
				}
			}()
		}
		time.Sleep(time.Duration(round) * 7 * time.Millisecond)
		tc.ob.Close()
		wg.Wait()
		t.Logf("round %d: %d watches and notifies done before Close", round, done.Load())
	}
}
