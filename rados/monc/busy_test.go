package monc

import (
	"context"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"net"
	"net/netip"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/purerbd/purerbd/rados/auth"
	"github.com/purerbd/purerbd/rados/denc"
)

// A test-only monitor that refuses every authentication with EBUSY, as
// a monitor does before its first quorum or when it has no global id to
// hand out. It speaks just enough msgr2.1 (crc frames with one control
// segment, all a handshake needs before AUTH_DONE).

// busyMon serves connections that end in AUTH_BAD_METHOD with EBUSY and
// counts them.
func busyMon(t testing.TB) (addr string, conns *atomic.Int32) {
	conns = new(atomic.Int32)
	addr = startFakeMon(t, func(nc net.Conn) {
		conns.Add(1)
		nc.Write(msgr2Banner())
		io.ReadFull(nc, make([]byte, 26))            // the client's banner
		if _, err := readTestFrame(nc); err != nil { // HELLO
			return
		}
		e := denc.NewEncoder(nil)
		e.U8(uint8(denc.EntityTypeMon))
		denc.NewEntityAddr(denc.AddrMsgr2, netip.MustParseAddrPort(nc.RemoteAddr().String()), 0).Encode(e)
		writeTestFrame(nc, 1, e.Bytes())             // HELLO
		if _, err := readTestFrame(nc); err != nil { // AUTH_REQUEST
			return
		}
		e = denc.NewEncoder(nil)
		e.U32(uint32(auth.MethodCephX))
		e.I32(-int32(syscall.EBUSY))
		e.U32(1) // allowed methods
		e.U32(uint32(auth.MethodCephX))
		e.U32(2) // allowed modes
		e.U32(1)
		e.U32(2)
		writeTestFrame(nc, 3, e.Bytes()) // AUTH_BAD_METHOD
		io.Copy(io.Discard, nc)
	})
	return addr, conns
}

// testCRC is Ceph's crc32c: the register without pre- and
// post-inversion, continued from seed.
func testCRC(seed uint32, p []byte) uint32 {
	return ^crc32.Update(^seed, crc32.MakeTable(crc32.Castagnoli), p)
}

// writeTestFrame writes a crc-mode frame with one control segment.
func writeTestFrame(w io.Writer, tag uint8, control []byte) error {
	var pre [32]byte
	pre[0], pre[1] = tag, 1
	binary.LittleEndian.PutUint32(pre[2:], uint32(len(control)))
	binary.LittleEndian.PutUint16(pre[6:], 8)
	binary.LittleEndian.PutUint32(pre[28:], testCRC(0, pre[:28]))
	b := append(pre[:], control...)
	b = binary.LittleEndian.AppendUint32(b, testCRC(^uint32(0), control))
	_, err := w.Write(b)
	return err
}

// readTestFrame reads a crc-mode frame with one control segment and
// returns its tag.
func readTestFrame(r io.Reader) (uint8, error) {
	var pre [32]byte
	if _, err := io.ReadFull(r, pre[:]); err != nil {
		return 0, err
	}
	if pre[1] != 1 {
		return 0, errors.New("frame with more than a control segment")
	}
	n := binary.LittleEndian.Uint32(pre[2:])
	if _, err := io.ReadFull(r, make([]byte, n+4)); err != nil {
		return 0, err
	}
	return pre[0], nil
}

// TestHuntRetriesBusyMonitor checks that EBUSY from a monitor is not
// taken as a refused key: the hunt keeps trying it until the deadline,
// and a good monitor dialed along with it wins.
func TestHuntRetriesBusyMonitor(t *testing.T) {
	cl := sharedCluster(t)
	busy, conns := busyMon(t)

	cfg := adminConfig(t, cl)
	cfg.MonAddrs = []string{busy}
	cfg.ConnectTimeout = 1500 * time.Millisecond
	cfg.HuntAttemptTimeout = 500 * time.Millisecond
	t0 := time.Now()
	c, err := New(context.Background(), cfg)
	took := time.Since(t0)
	if err == nil {
		c.Close()
		t.Fatal("connected to a busy monitor")
	}
	t.Logf("%v (after %v, %d connections)", err, took.Round(time.Millisecond), conns.Load())
	var ae *auth.Error
	if !errors.As(err, &ae) || ae.Errno != syscall.EBUSY || !errors.Is(err, syscall.EBUSY) || !errors.Is(err, auth.ErrTryAgain) {
		t.Errorf("error does not carry EBUSY as a refusal for now")
	}
	if errors.Is(err, auth.ErrAuthFailed) {
		t.Errorf("EBUSY taken as a refused key")
	}
	if !errors.Is(err, context.DeadlineExceeded) || took < time.Second || conns.Load() < 2 {
		t.Errorf("the hunt gave up after %v and %d attempts, want retries until the deadline", took, conns.Load())
	}

	// a busy monitor and a good one
	cfg = adminConfig(t, cl)
	cfg.MonAddrs = []string{busy, busy, cl.MonAddrs[0]}
	c = connect(t, cfg)
	if si := c.Session(); si.Mon != "a" {
		t.Errorf("session %+v", si)
	}
}
