package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/purerbd/purerbd/nbd"
	"github.com/purerbd/purerbd/nbd/kernel"
	"github.com/purerbd/purerbd/nbd/kernel/vmtest/guestio"
)

// healStalls is how many reads are stalled past the request timeout, one
// after another: more than there are connections, so that the device
// survives only if dropped connections are replaced.
const healStalls = fileConns + 2

// stallingMemory is a Memory export whose first read at each armed
// offset waits for stall before it is served.
type stallingMemory struct {
	*nbd.Memory
	stall time.Duration

	mu    sync.Mutex
	armed map[int64]bool
	hits  int
}

func (m *stallingMemory) arm(off int64) {
	m.mu.Lock()
	m.armed[off] = true
	m.mu.Unlock()
}

func (m *stallingMemory) ReadAt(ctx context.Context, p []byte, off int64) (int, error) {
	m.mu.Lock()
	stall := m.armed[off]
	delete(m.armed, off)
	if stall {
		m.hits++
	}
	m.mu.Unlock()
	if stall {
		select {
		case <-time.After(m.stall):
		case <-ctx.Done():
		}
	}
	return m.Memory.ReadAt(ctx, p, off)
}

// healDroppedConnections attaches a Memory export over fileConns
// connections with a one-second request timeout and no dead connection
// timeout, then stalls single reads past that timeout, one after
// another, healStalls times. Each time the kernel gives up on the
// stalled read's connection and resends the read on another, and the
// device gets a LINK_DEAD notification and replaces the dropped
// connection; every read must return the bytes written. Without
// replacements the fourth stall takes the last connection and I/O fails.
func (s *scenario) healDroppedConnections(ctx context.Context) error {
	mem, err := nbd.NewMemory(16 * mib)
	if err != nil {
		return err
	}
	back := &stallingMemory{Memory: mem, stall: 3 * time.Second, armed: map[int64]bool{}}
	dev, err := kernel.Attach(ctx, kernel.AttachConfig{
		Backend: back, BlockSize: 4096, Conns: fileConns, Cookie: "heal-0001",
		Index: kernel.AnyIndex, Timeout: time.Second, Logger: logger("scenario"),
		Client: kernel.ClientConfig{Trace: traceLinkDead},
	})
	if err != nil {
		return err
	}
	idx := dev.Index()
	timeoutsBefore := countDmesg("nbd" + fmt.Sprint(idx) + ": Connection timed out")
	t := time.Now()
	for i := range healStalls {
		off := int64(i+1) * mib
		data := make([]byte, 64<<10)
		rand.Read(data)
		back.arm(off)
		if err := guestio.DirectIO(dev.Path(), data, off); err != nil {
			return fmt.Errorf("stall %d of %d: %w", i+1, healStalls, err)
		}
	}
	s.Timings["heal: stalled reads, each past the timeout"] = time.Since(t).Seconds()
	timeouts := countDmesg("nbd"+fmt.Sprint(idx)+": Connection timed out") - timeoutsBefore
	fmt.Printf("    nbd%d: %d reads stalled, kernel timed out %d requests\n", idx, back.hits, timeouts)
	if back.hits != healStalls || timeouts < healStalls {
		return fmt.Errorf("%d stalls hit the backend and the kernel timed out %d requests, want %d of each", back.hits, timeouts, healStalls)
	}
	// Every stalled request's old connection ends once its late reply
	// finds the socket shut; the replacements stay.
	deadline := time.Now().Add(20 * time.Second)
	for dev.Conns() != fileConns {
		if time.Now().After(deadline) {
			return fmt.Errorf("serving %d connections after the stalls, want %d", dev.Conns(), fileConns)
		}
		time.Sleep(100 * time.Millisecond)
	}
	s.Facts["heal_replaced_connections"] = timeouts
	if err := dev.Detach(ctx); err != nil {
		return err
	}
	return s.waitFree(ctx, idx)
}

// traceLinkDead prints the LINK_DEAD notifications received, in hex:
// real kernel bytes for the decoder's test vectors.
func traceLinkDead(sent bool, b []byte) {
	const genlCmd = 16 // after the netlink header
	if !sent && len(b) > genlCmd && b[genlCmd] == 4 {
		fmt.Printf("NETLINK linkdead rx %s\n", hex.EncodeToString(b))
	}
}

// countDmesg counts the kernel log lines that contain sub.
func countDmesg(sub string) int {
	return strings.Count(guestio.DmesgTail(5000), sub)
}
