package main

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"sync/atomic"
	"time"
)

// streamWriter appends random chunks to a file, each made durable with
// fdatasync before the next, until stopped: I/O always in flight, which
// stalls visibly when the device does.
type streamWriter struct {
	synced atomic.Int64
	// lastSync is when the last chunk was synced (unix nanoseconds).
	lastSync atomic.Int64
	stop     chan struct{}
	done     chan streamResult
}

type streamResult struct {
	sum   string
	bytes int64
	err   error
}

const streamChunk = 128 << 10

func startStreamWriter(path string) *streamWriter {
	w := &streamWriter{stop: make(chan struct{}), done: make(chan streamResult, 1)}
	go func() {
		f, err := os.Create(path)
		if err != nil {
			w.done <- streamResult{err: err}
			return
		}
		h := sha256.New()
		var n int64
		buf := make([]byte, streamChunk)
		for {
			select {
			case <-w.stop:
				err := f.Close()
				w.done <- streamResult{sum: hex.EncodeToString(h.Sum(nil)), bytes: n, err: err}
				return
			default:
			}
			rand.Read(buf)
			if _, err := f.Write(buf); err != nil {
				f.Close()
				w.done <- streamResult{err: err}
				return
			}
			if err := f.Sync(); err != nil {
				f.Close()
				w.done <- streamResult{err: err}
				return
			}
			h.Write(buf)
			n += streamChunk
			w.lastSync.Store(time.Now().UnixNano())
			w.synced.Add(1)
		}
	}()
	return w
}

// waitProgress waits until n more chunks are synced than now, or the
// timeout; it reports whether they were.
func (w *streamWriter) waitProgress(n int64, timeout time.Duration) bool {
	target := w.synced.Load() + n
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if w.synced.Load() >= target {
			return true
		}
	}
	return false
}

func (w *streamWriter) finish() streamResult {
	close(w.stop)
	return <-w.done
}
