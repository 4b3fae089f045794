// Package guestio holds workloads that guest programs run on a device
// under test inside the VM: shared by the nbd/kernel and csi node
// scenarios so both measure stalls and verify data the same way.
package guestio

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"sync/atomic"
	"time"
)

// StreamWriter appends random chunks to a file, each made durable with
// fdatasync before the next, until stopped: a workload that always has
// I/O in flight, and stalls visibly when the device does.
type StreamWriter struct {
	synced   atomic.Int64 // chunks written and synced
	lastSync atomic.Int64 // when the last chunk was synced (unix nanoseconds)
	stop     chan struct{}
	done     chan Result
}

// Result is what a StreamWriter wrote: the sha256 of the file's bytes
// and their count, or why it stopped early.
type Result struct {
	Sum   string
	Bytes int64
	Err   error
}

// StartStreamWriter creates path and starts writing chunk-sized pieces.
func StartStreamWriter(path string, chunk int) *StreamWriter {
	w := &StreamWriter{stop: make(chan struct{}), done: make(chan Result, 1)}
	go func() {
		f, err := os.Create(path)
		if err != nil {
			w.done <- Result{Err: err}
			return
		}
		h := sha256.New()
		var n int64
		buf := make([]byte, chunk)
		for {
			select {
			case <-w.stop:
				err := f.Close()
				w.done <- Result{Sum: hex.EncodeToString(h.Sum(nil)), Bytes: n, Err: err}
				return
			default:
			}
			rand.Read(buf)
			if _, err := f.Write(buf); err != nil {
				f.Close()
				w.done <- Result{Err: err}
				return
			}
			if err := f.Sync(); err != nil {
				f.Close()
				w.done <- Result{Err: err}
				return
			}
			h.Write(buf)
			n += int64(chunk)
			w.lastSync.Store(time.Now().UnixNano())
			w.synced.Add(1)
		}
	}()
	return w
}

// Synced returns the number of chunks written and synced so far.
func (w *StreamWriter) Synced() int64 { return w.synced.Load() }

// Stopped reports whether the writer ended by itself (an error: a full
// device, an I/O error) and with what, without stopping it.
func (w *StreamWriter) Stopped() (Result, bool) {
	select {
	case r := <-w.done:
		w.done <- r // for Finish
		return r, true
	default:
		return Result{}, false
	}
}

// LastSync returns when the last chunk was synced (zero before the first).
func (w *StreamWriter) LastSync() time.Time { return time.Unix(0, w.lastSync.Load()) }

// WaitProgress waits until at least n more chunks are synced than now,
// or until the timeout; it reports whether they were.
func (w *StreamWriter) WaitProgress(n int64, timeout time.Duration) bool {
	target := w.synced.Load() + n
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if w.synced.Load() >= target {
			return true
		}
	}
	return false
}

// Finish stops the writer and returns what it wrote.
func (w *StreamWriter) Finish() Result {
	close(w.stop)
	return <-w.done
}
