package msgr

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/purerbd/purerbd/rados/denc"
)

const (
	msgMonCommand    = 50 // MSG_MON_COMMAND
	msgMonCommandAck = 51 // MSG_MON_COMMAND_ACK
)

// monCommand encodes an MMonCommand for this cluster.
func monCommand(t testing.TB, tid uint64, cmd string) *Message {
	t.Helper()
	fsid, err := denc.ParseUUID(cluster.FSID)
	if err != nil {
		t.Fatal(err)
	}
	e := denc.NewEncoder(nil)
	e.U64(0)  // PaxosServiceMessage version
	e.I16(-1) // session_mon
	e.U64(0)  // session_mon_tid
	fsid.Encode(e)
	e.U32(1)
	e.String(cmd)
	return &Message{Type: msgMonCommand, Version: 1, Tid: tid, Front: e.Bytes()}
}

// TestRecvInto receives the output of monitor commands (their data
// segments) into registered buffers: used when it fits, not when too
// small or withdrawn before; withdrawn while a segment arrives, the
// message is dropped and the buffer left to its owner at once (-race
// checks that), and only a peer stalled mid-chunk costs the connection.
func TestRecvInto(t *testing.T) {
	requireCluster(t)
	ctx := ctxT(t, 60*time.Second)
	value := bytes.Repeat([]byte("purerbd "), 60<<10/8)
	file := filepath.Join(t.TempDir(), "value")
	if err := os.WriteFile(file, value, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := cluster.Ceph(ctx, "config-key", "set", "purerbd-recvinto", "-i", file); err != nil {
		t.Fatal(err)
	}
	p := newFaultProxy(t, cluster.MonAddrs[0])
	c, err := Dial(ctx, cluster.MonAddrs[0], Config{Auth: adminCephX(t), PeerType: denc.EntityTypeMon, Mode: ModeCRC, DialContext: p.dial})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	get := func(tid uint64) *Message {
		t.Helper()
		if err := c.Send(ctx, monCommand(t, tid, `{"prefix":"config-key get","key":"purerbd-recvinto"}`)); err != nil {
			t.Fatal(err)
		}
		m := receive(t, c, msgMonCommandAck)
		if m.Tid != tid || !bytes.Equal(m.Data, value) {
			t.Fatalf("ack tid %d (want %d) with %d bytes of output", m.Tid, tid, len(m.Data))
		}
		return m
	}
	aliases := func(m *Message, buf []byte) bool { return &m.Data[0] == &buf[0] }

	buf := make([]byte, 64<<10)
	c.RecvInto(1, msgMonCommandAck, buf)
	if m := get(1); !aliases(m, buf) {
		t.Error("the registered buffer was not used")
	}
	if m := get(1); aliases(m, buf) {
		t.Error("a registration was used twice")
	}
	small := make([]byte, len(value)-1)
	c.RecvInto(2, msgMonCommandAck, small)
	if m := get(2); aliases(m, small) {
		t.Error("a buffer too small was used")
	}
	c.Withdraw(2)
	other := make([]byte, 64<<10)
	c.RecvInto(3, msgMonCommand, other) // the wrong type
	c.RecvInto(4, msgMonCommandAck, other)
	c.Withdraw(4)
	if m := get(3); aliases(m, other) {
		t.Error("a buffer registered for another message type was used")
	}
	if m := get(4); aliases(m, other) {
		t.Error("a withdrawn buffer was used")
	}

	// Withdrawn while the output of a larger command (enough values for
	// more than one chunk) arrives into the buffer: the proxy pauses the
	// monitor's bytes inside the first chunk. Resumed within the grace,
	// the reader finishes the chunk, reads the rest into scratch memory,
	// drops the message and the connection lives on; left paused, the
	// connection fails.
	for i := 1; i <= dataChunk/len(value)+2; i++ {
		if _, err := cluster.Ceph(ctx, "config-key", "set", fmt.Sprintf("purerbd-recvinto-%d", i), "-i", file); err != nil {
			t.Fatal(err)
		}
	}
	dump := func(tid uint64) error {
		return c.Send(ctx, monCommand(t, tid, `{"prefix":"config-key dump","key":"purerbd-recvinto-"}`))
	}
	if err := dump(10); err != nil {
		t.Fatal(err)
	}
	if m := receive(t, c, msgMonCommandAck); len(m.Data) < dataChunk+32<<10 {
		t.Fatalf("config-key dump: %d bytes, want more than a chunk and the pause", len(m.Data))
	}
	withdrawPaused := func(tid uint64, resume bool) []byte {
		t.Helper()
		held := make([]byte, 4*dataChunk)
		c.RecvInto(tid, msgMonCommandAck, held)
		hold := p.forwarded.Load() + 64<<10 // in the first chunk (dataChunk is larger)
		p.holdAt.Store(hold)
		if err := dump(tid); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(10 * time.Second)
		for {
			c.rx.mu.Lock()
			active := c.rx.filling && c.rx.active.tid == tid
			c.rx.mu.Unlock()
			if active && p.forwarded.Load() >= hold {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the reply did not arrive into the buffer up to the pause (%v, %d of %d bytes)", active, p.forwarded.Load(), hold)
			}
			time.Sleep(time.Millisecond)
		}
		if !resume {
			// The reader must have taken everything forwarded and be
			// waiting for more: bytes still queued on its socket would
			// let it notice the withdrawal and stop before the grace.
			for unread(t, c) > 0 {
				if time.Now().After(deadline) {
					t.Fatal("the reader did not take the bytes forwarded up to the pause")
				}
				time.Sleep(time.Millisecond)
			}
			time.Sleep(50 * time.Millisecond) // and is back in its read
		}
		withdrawn := make(chan struct{})
		go func() {
			c.Withdraw(tid)
			close(withdrawn)
		}()
		if resume {
			time.Sleep(20 * time.Millisecond)
			p.holdAt.Store(0)
		}
		select {
		case <-withdrawn:
		case <-time.After(5 * time.Second):
			t.Fatal("Withdraw of a buffer being filled did not return")
		}
		clear(held) // ours again (-race)
		return held
	}
	withdrawPaused(11, true)
	if err := dump(12); err != nil {
		t.Fatal(err)
	}
	if m := receive(t, c, msgMonCommandAck); m.Tid != 12 {
		t.Fatalf("after a withdrawn message: ack for tid %d, want 12 (the withdrawn one is dropped)", m.Tid)
	}
	if err := c.Err(); err != nil {
		t.Fatalf("connection failed: %v", err)
	}

	withdrawPaused(13, false)
	if !errors.Is(c.Err(), ErrWithdrawn) {
		t.Fatalf("connection error %v, want ErrWithdrawn", c.Err())
	}
	p.holdAt.Store(0)
}

// unread is how many received bytes wait in c's socket (SIOCINQ).
func unread(t *testing.T, c *Conn) int {
	t.Helper()
	sc, ok := c.nc.(syscall.Conn)
	if !ok {
		t.Fatalf("%T has no file descriptor", c.nc)
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	if err := rc.Control(func(fd uintptr) { n, err = unix.IoctlGetInt(int(fd), unix.SIOCINQ) }); err != nil {
		t.Fatal(err)
	}
	if err != nil {
		t.Fatalf("SIOCINQ: %v", err)
	}
	return n
}
