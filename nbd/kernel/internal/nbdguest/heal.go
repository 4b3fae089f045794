package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
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
// offset waits for stall before it is served, and whose first write at
// the armed write offset waits for writeStall, then lands unless its
// context ended (as an OSD request not yet sent would).
type stallingMemory struct {
	*nbd.Memory
	stall, writeStall time.Duration

	mu         sync.Mutex
	armed      map[int64]bool
	hits       int
	writeArmed int64 // -1: none
	writeDone  chan error
	paused     chan struct{} // nil, or closed when a pause ends
}

// pause holds every read and write that starts in the next d (and those
// waiting already) until d has passed or its request is cancelled: a
// cluster that stops answering for a while.
func (m *stallingMemory) pause(d time.Duration) {
	ch := make(chan struct{})
	m.mu.Lock()
	m.paused = ch
	m.mu.Unlock()
	time.AfterFunc(d, func() {
		m.mu.Lock()
		m.paused = nil
		m.mu.Unlock()
		close(ch)
	})
}

// waitPause waits out a pause; it returns ctx's error if ctx ends first.
func (m *stallingMemory) waitPause(ctx context.Context) error {
	m.mu.Lock()
	ch := m.paused
	m.mu.Unlock()
	if ch == nil {
		return nil
	}
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (m *stallingMemory) armWrite(off int64) {
	m.mu.Lock()
	m.writeArmed, m.writeDone = off, make(chan error, 1)
	m.mu.Unlock()
}

func (m *stallingMemory) WriteAt(ctx context.Context, p []byte, off int64) (int, error) {
	if err := m.waitPause(ctx); err != nil {
		return 0, err
	}
	m.mu.Lock()
	stall := m.writeArmed == off
	done := m.writeDone
	if stall {
		m.writeArmed = -1
	}
	m.mu.Unlock()
	if !stall {
		return m.Memory.WriteAt(ctx, p, off)
	}
	select {
	case <-time.After(m.writeStall):
	case <-ctx.Done():
	}
	if err := ctx.Err(); err != nil {
		done <- err
		return 0, err
	}
	n, err := m.Memory.WriteAt(ctx, p, off)
	done <- err
	return n, err
}

func (m *stallingMemory) arm(off int64) {
	m.mu.Lock()
	m.armed[off] = true
	m.mu.Unlock()
}

// stalledReads is how many reads were held back.
func (m *stallingMemory) stalledReads() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.hits
}

func (m *stallingMemory) ReadAt(ctx context.Context, p []byte, off int64) (int, error) {
	if err := m.waitPause(ctx); err != nil {
		return 0, err
	}
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
	back := &stallingMemory{Memory: mem, stall: 3 * time.Second, writeStall: 6 * time.Second,
		armed: map[int64]bool{}, writeArmed: -1}
	dev, err := kernel.Attach(ctx, kernel.AttachConfig{
		Backend: back, BlockSize: 4096, Conns: fileConns, Cookie: "heal-0001",
		Index: kernel.AnyIndex, Timeout: time.Second, Logger: logger("scenario"),
		Client: kernel.ClientConfig{Trace: traceLinkDead},
	})
	if err != nil {
		return err
	}
	idx := dev.Index()
	timedOut := fmt.Sprintf("nbd%d: Connection timed out", idx)
	timeoutsBefore := countDmesg(timedOut)
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
	timeouts := countDmesg(timedOut) - timeoutsBefore
	stalled := back.stalledReads()
	fmt.Printf("    nbd%d: %d reads stalled, kernel timed out %d requests\n", idx, stalled, timeouts)
	if stalled != healStalls || timeouts < healStalls {
		return fmt.Errorf("%d stalls hit the backend and the kernel timed out %d requests, want %d of each", stalled, timeouts, healStalls)
	}
	// Every stalled request's old connection ends once the server has
	// cancelled the request's backend call; the replacements stay.
	deadline := time.Now().Add(20 * time.Second)
	for dev.Conns() != fileConns {
		if time.Now().After(deadline) {
			return fmt.Errorf("serving %d connections after the stalls, want %d", dev.Conns(), fileConns)
		}
		time.Sleep(100 * time.Millisecond)
	}
	s.Facts["heal_replaced_connections"] = timeouts
	return s.abandonedWriteAndDetach(ctx, dev, back, idx)
}

// abandonedWriteAndDetach ends a scenario whose device had connections
// dropped and replaced: the abandoned-write guarantee (abandonedWrite),
// then an orderly detach after which serving did not end on a failure,
// and the device free again.
func (s *scenario) abandonedWriteAndDetach(ctx context.Context, dev *kernel.Device, back *stallingMemory, idx int) error {
	if err := s.abandonedWrite(dev, back); err != nil {
		return err
	}
	if err := dev.Detach(ctx); err != nil {
		return err
	}
	if err := dev.Err(); err != nil {
		return fmt.Errorf("after an orderly detach the device reports a failure: %w", err)
	}
	return s.waitFree(ctx, idx)
}

// abandonedWrite stalls one write past the request timeout: the kernel
// resends it on another connection, and a newer write to the same block
// completes while the first copy still waits in the backend. That copy
// must never land: the server cancels what is in flight on a connection
// the kernel gave up on.
func (s *scenario) abandonedWrite(dev *kernel.Device, back *stallingMemory) error {
	const off = 12 * mib
	older, newer := make([]byte, 64<<10), make([]byte, 64<<10)
	rand.Read(older)
	rand.Read(newer)
	back.armWrite(off)
	if err := guestio.DirectIO(dev.Path(), older, off); err != nil {
		return fmt.Errorf("stalled write: %w", err)
	}
	if err := guestio.DirectIO(dev.Path(), newer, off); err != nil {
		return fmt.Errorf("newer write: %w", err)
	}
	select {
	case err := <-back.writeDone:
		fmt.Printf("    the stalled first copy of the write ended with: %v\n", err)
		if err == nil {
			return errors.New("the write the kernel gave up on landed after a newer one")
		}
	case <-time.After(2 * back.writeStall):
		return errors.New("the stalled write never returned")
	}
	got := make([]byte, len(newer))
	if _, err := back.Memory.ReadAt(context.Background(), got, off); err != nil {
		return err
	}
	if !bytes.Equal(got, newer) {
		return errors.New("the block holds other bytes than the newest write")
	}
	return nil
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
