package guestio

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// DirectWriters keep n O_DIRECT writes in flight on a block device, one
// per goroutine, each cycling through its own region block by block.
// Every block carries (writer, sequence) throughout, so that Verify can
// tell that each block holds the last write that completed there. They
// measure the longest time any writer waited for one write: the stall a
// writer sees.
type DirectWriters struct {
	path   string
	base   int64
	region int64 // bytes per writer
	block  int

	stop   chan struct{}
	wg     sync.WaitGroup
	writes atomic.Int64
	bytes  atomic.Int64

	mu     sync.Mutex
	err    error
	maxGap time.Duration
	last   [][]uint64 // per writer, per block: sequence of the last completed write (0: none)
}

func StartDirectWriters(path string, n int, base, region int64, block int) *DirectWriters {
	w := &DirectWriters{path: path, base: base, region: region, block: block, stop: make(chan struct{})}
	w.last = make([][]uint64, n)
	for i := range n {
		w.last[i] = make([]uint64, region/int64(block))
		w.wg.Add(1)
		go w.run(i)
	}
	return w
}

func (w *DirectWriters) fail(err error) {
	w.mu.Lock()
	if w.err == nil {
		w.err = err
	}
	w.mu.Unlock()
}

func fillBlock(buf []byte, writer int, seq uint64) {
	v := uint64(writer)<<48 | seq
	for i := 0; i+8 <= len(buf); i += 8 {
		binary.LittleEndian.PutUint64(buf[i:], v)
	}
}

func (w *DirectWriters) run(i int) {
	defer w.wg.Done()
	buf, err := unix.Mmap(-1, 0, w.block, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		w.fail(err)
		return
	}
	defer unix.Munmap(buf)
	f, err := os.OpenFile(w.path, os.O_RDWR|unix.O_DIRECT, 0)
	if err != nil {
		w.fail(err)
		return
	}
	defer f.Close()
	blocks := len(w.last[i])
	for seq := uint64(1); ; seq++ {
		select {
		case <-w.stop:
			return
		default:
		}
		b := int(seq-1) % blocks
		fillBlock(buf, i, seq)
		t := time.Now()
		if _, err := f.WriteAt(buf, w.base+int64(i)*w.region+int64(b*w.block)); err != nil {
			w.fail(fmt.Errorf("writer %d, write %d: %w", i, seq, err))
			return
		}
		gap := time.Since(t)
		w.mu.Lock()
		w.last[i][b] = seq
		w.maxGap = max(w.maxGap, gap)
		w.mu.Unlock()
		w.writes.Add(1)
		w.bytes.Add(int64(w.block))
	}
}

// WaitProgress waits until n more writes completed than now.
func (w *DirectWriters) WaitProgress(n int64, timeout time.Duration) bool {
	target := w.writes.Load() + n
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if w.writes.Load() >= target {
			return true
		}
		if w.FirstErr() != nil {
			return false
		}
	}
	return false
}

// Writes returns the number of writes completed so far.
func (w *DirectWriters) Writes() int64 { return w.writes.Load() }

// Bytes returns the number of bytes written so far.
func (w *DirectWriters) Bytes() int64 { return w.bytes.Load() }

// FirstErr returns the first write error, if any.
func (w *DirectWriters) FirstErr() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// Finish stops the writers, waits for their last writes and returns the
// longest wait for one write, or the first error.
func (w *DirectWriters) Finish() (time.Duration, error) {
	close(w.stop)
	w.wg.Wait()
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.maxGap, w.err
}

// Verify reads every block written (through readAt: the device, or the
// backing file) and checks that it holds the last write that completed.
func (w *DirectWriters) Verify(readAt func(p []byte, off int64) error) error {
	buf := make([]byte, w.block)
	want := make([]byte, w.block)
	checked := 0
	for i, blocks := range w.last {
		for b, seq := range blocks {
			if seq == 0 {
				continue
			}
			off := w.base + int64(i)*w.region + int64(b*w.block)
			if err := readAt(buf, off); err != nil {
				return err
			}
			fillBlock(want, i, seq)
			if string(buf) != string(want) {
				got := binary.LittleEndian.Uint64(buf)
				return fmt.Errorf("writer %d block %d at %d: holds writer %d write %d, want write %d",
					i, b, off, got>>48, got&(1<<48-1), seq)
			}
			checked++
		}
	}
	if checked == 0 {
		return errors.New("nothing was written")
	}
	return nil
}

// ReadDirect reads from a block device with O_DIRECT.
func ReadDirect(path string) (func(p []byte, off int64) error, func(), error) {
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_DIRECT, 0)
	if err != nil {
		return nil, nil, err
	}
	var (
		buf []byte
		mu  sync.Mutex
	)
	read := func(p []byte, off int64) error {
		mu.Lock()
		defer mu.Unlock()
		if len(buf) < len(p) {
			if buf != nil {
				unix.Munmap(buf)
			}
			if buf, err = unix.Mmap(-1, 0, len(p), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE); err != nil {
				return err
			}
		}
		if _, err := f.ReadAt(buf[:len(p)], off); err != nil {
			return err
		}
		copy(p, buf)
		return nil
	}
	return read, func() {
		if buf != nil {
			unix.Munmap(buf)
		}
		f.Close()
	}, nil
}
