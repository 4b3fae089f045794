package osdc

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/purerbd/purerbd/rados/msgr"
	"github.com/purerbd/purerbd/rados/radostest"
)

func TestWriteReadEndToEnd(t *testing.T) {
	tc := connect(t, cluster, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	data := bytes.Repeat([]byte("purerbd-osdc "), 1000)
	if _, err := tc.ob.Do(ctx, &Request{Pool: tc.pool, OID: "e2e-1", Ops: []OSDOp{WriteFull(data)}}); err != nil {
		t.Fatalf("writefull: %v", err)
	}
	rep, err := tc.ob.Do(ctx, &Request{Pool: tc.pool, OID: "e2e-1", Ops: []OSDOp{Read(0, 0), Stat()}})
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	if !bytes.Equal(rep.Ops[0].OutData, data) {
		t.Fatalf("read %d bytes, want %d identical", len(rep.Ops[0].OutData), len(data))
	}
	size, _, err := ParseStat(rep.Ops[1].OutData)
	if err != nil || size != uint64(len(data)) {
		t.Fatalf("stat: size %d, %v", size, err)
	}
	// the rados CLI sees the same bytes
	out := filepath.Join(t.TempDir(), "obj")
	if _, err := cluster.Rados(ctx, "-p", cluster.Pool, "get", "e2e-1", out); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(out)
	if !bytes.Equal(got, data) {
		t.Fatalf("rados get: %d bytes differ", len(got))
	}
	// a missing object is ENOENT
	_, err = tc.ob.Do(ctx, &Request{Pool: tc.pool, OID: "e2e-missing", Ops: []OSDOp{Read(0, 0)}})
	if !errors.Is(err, syscall.ENOENT) || !errors.Is(err, ENOENT) {
		t.Fatalf("read of a missing object: %v, want ENOENT", err)
	}
}

// TestSecureMode: on a cluster that allows only secure mode, OSD sessions
// negotiate AES-GCM and carry requests (a 5 MiB write spans many
// segments of the secure framing).
func TestSecureMode(t *testing.T) {
	c := radostest.New(t, radostest.Options{Mode: radostest.ModeSecure})
	tc := connect(t, c, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	data := bytes.Repeat([]byte{1, 2, 3, 4, 5, 6, 7}, 5<<20/7)
	if _, err := tc.ob.Do(ctx, &Request{Pool: tc.pool, OID: "secure", Ops: []OSDOp{WriteFull(data)}}); err != nil {
		t.Fatal(err)
	}
	rep, err := tc.ob.Do(ctx, &Request{Pool: tc.pool, OID: "secure", Ops: []OSDOp{Read(0, 0)}})
	if err != nil || !bytes.Equal(rep.Ops[0].OutData, data) {
		t.Fatalf("read back: %v", err)
	}
	// an OutBuf cannot take a sealed segment, and is not needed
	out := make([]byte, len(data))
	rep, err = tc.ob.Do(ctx, &Request{Pool: tc.pool, OID: "secure", Ops: []OSDOp{Read(0, uint64(len(out)))}, OutBuf: out})
	if err != nil || !bytes.Equal(rep.Ops[0].OutData, data) {
		t.Fatalf("read back with an OutBuf: %v", err)
	}
	s, err := tc.ob.session(rep.OSD)
	if err != nil {
		t.Fatal(err)
	}
	if m := s.currentConn().Mode(); m != msgr.ConnModeSecure {
		t.Fatalf("OSD session mode %s, want secure", m)
	}
}

// TestReadIntoOutBuf reads into Request.OutBuf: the reply's data arrives
// in it when it fits (also for a short read), not when it does not; and
// many reads cancelled at random moments give their buffers back when Do
// returns, whatever the reply was doing (-race checks the writes made to
// the buffers right after).
func TestReadIntoOutBuf(t *testing.T) {
	checkGoroutines(t)
	tc := connect(t, cluster, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	data := bytes.Repeat([]byte("purerbd-outbuf "), 1<<20/15)
	if _, err := tc.ob.Do(ctx, &Request{Pool: tc.pool, OID: "outbuf", Ops: []OSDOp{WriteFull(data)}}); err != nil {
		t.Fatal(err)
	}
	read := func(ctx context.Context, off, n uint64, buf []byte) (*Reply, error) {
		return tc.ob.Do(ctx, &Request{Pool: tc.pool, OID: "outbuf", Ops: []OSDOp{Read(off, n)}, OutBuf: buf})
	}
	buf := make([]byte, len(data))
	rep, err := read(ctx, 0, uint64(len(buf)), buf)
	if err != nil || !bytes.Equal(rep.Ops[0].OutData, data) || &rep.Ops[0].OutData[0] != &buf[0] {
		t.Fatalf("read into OutBuf: %v (aliases: %v)", err, err == nil && &rep.Ops[0].OutData[0] == &buf[0])
	}
	// a short read at the end of the object
	rep, err = read(ctx, uint64(len(data)-100), 4096, buf)
	if err != nil || !bytes.Equal(rep.Ops[0].OutData, data[len(data)-100:]) || &rep.Ops[0].OutData[0] != &buf[0] {
		t.Fatalf("short read into OutBuf: %v", err)
	}
	// too small: the reply's own memory
	small := make([]byte, 1000)
	rep, err = read(ctx, 0, 2000, small)
	if err != nil || !bytes.Equal(rep.Ops[0].OutData, data[:2000]) || &rep.Ops[0].OutData[0] == &small[0] {
		t.Fatalf("read into a small OutBuf: %v", err)
	}

	// 16 readers at once; the first round, without deadlines, measures
	// how long a read takes, then deadlines fall anywhere in twice that
	var wg sync.WaitGroup
	var done, canceled, slowest atomic.Int64
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			buf := make([]byte, len(data))
			for i := 0; i < 40; i++ {
				limit := time.Minute
				if i > 0 {
					limit = time.Duration(rng.Int64N(2*slowest.Load() + 1))
				}
				t0 := time.Now()
				rctx, rcancel := context.WithTimeout(ctx, limit)
				rep, err := read(rctx, 0, uint64(len(buf)), buf)
				rcancel()
				if i == 0 {
					for d := int64(time.Since(t0)); d > slowest.Load(); {
						if slowest.CompareAndSwap(slowest.Load(), d) {
							break
						}
					}
				}
				switch {
				case err == nil:
					if !bytes.Equal(rep.Ops[0].OutData, data) {
						t.Errorf("read %d bytes, differing", len(rep.Ops[0].OutData))
						return
					}
					done.Add(1)
				case errors.Is(err, context.DeadlineExceeded):
					canceled.Add(1)
				default:
					t.Error(err)
					return
				}
				clear(buf) // the buffer is ours again
			}
		}()
	}
	wg.Wait()
	t.Logf("%d reads done, %d cancelled (deadlines up to %v)", done.Load(), canceled.Load(), 2*time.Duration(slowest.Load()))
	// a cancelled read's reply is dropped, not its connection
	st := tc.ob.Stats()
	if st.SessionResets != 0 {
		t.Errorf("%d session resets", st.SessionResets)
	}
	// every write carried at least one message, no message went out that
	// was not an op's send (a cancelled one may not have), and the first
	// op's data went out
	if w := st.Written; w.Writes == 0 || w.Writes > w.Messages || w.Messages > st.Sends || w.Bytes < uint64(len(data)) {
		t.Errorf("written %+v for %d sends after a %d-byte write", w, st.Sends, len(data))
	} else {
		t.Logf("%d sends, %d messages written in %d writes", st.Sends, w.Messages, w.Writes)
	}
	// with a deadline of its own: on a slow machine (-race, load) the 640
	// reads above may have used up ctx, cancelling the last of them
	fctx, fcancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer fcancel()
	if _, err := read(fctx, 0, uint64(len(buf)), buf); err != nil {
		t.Fatalf("read after the cancellations: %v", err)
	}
}
