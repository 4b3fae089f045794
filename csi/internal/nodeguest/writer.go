package main

import (
	"fmt"
	"time"

	"github.com/purerbd/purerbd/nbd/kernel/vmtest/guestio"
)

// streamChunk is the size of each synced write of the scenario's writers.
const streamChunk = 128 << 10

func startStreamWriter(path string) *guestio.StreamWriter {
	return guestio.StartStreamWriter(path, streamChunk)
}

// heldWriter is a writer the scenario watches across the plugin's
// SIGKILL and restart.
type heldWriter struct {
	w          *guestio.StreamWriter
	lastBefore time.Time // its last synced chunk before the kill
	resumed    chan time.Time
	resumedAt  time.Time // its first synced chunk after the restart
}

// watchResume, called once the writer is known to be held, notes when
// it syncs again.
func (h *heldWriter) watchResume() {
	h.resumed = make(chan time.Time, 1)
	base := h.w.Synced()
	go func() {
		for deadline := time.Now().Add(3 * time.Minute); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			if h.w.Synced() > base {
				h.resumed <- time.Now()
				return
			}
		}
		close(h.resumed)
	}()
}

// awaitResume waits for the writer to resume after the restart and
// returns its stall: from its last chunk synced before the kill to the
// first after. what names it in the console line.
func (h *heldWriter) awaitResume(what string, killed time.Time) (float64, error) {
	at, ok := <-h.resumed
	if !ok {
		return 0, fmt.Errorf("the %s writer is still blocked", what)
	}
	h.resumedAt = at
	stall := at.Sub(h.lastBefore).Seconds()
	fmt.Printf("### %s I/O stall across the restart: %.2fs (SIGKILL to writes resumed %.2fs)\n", what, stall, at.Sub(killed).Seconds())
	if !h.w.WaitProgress(3, 120*time.Second) {
		return 0, stuck(h.w, what, "blocked again")
	}
	return stall, nil
}

// finish waits for the writer to resume (awaitResume), records its
// stall under stallKey in timings, stops it and, if it wrote without
// error, records its bytes across the kill under bytesKey in facts.
func (h *heldWriter) finish(what string, killed time.Time, timings map[string]float64, facts map[string]any, stallKey, bytesKey string) (guestio.Result, error) {
	stall, err := h.awaitResume(what, killed)
	if err != nil {
		return guestio.Result{}, err
	}
	timings[stallKey] = stall
	res := h.w.Finish()
	if res.Err != nil {
		return res, res.Err
	}
	facts[bytesKey] = res.Bytes
	return res, nil
}

// stuck describes a writer that stopped progressing: ended by an error
// of its own (say which, and after how many chunks), or blocked.
func stuck(w *guestio.StreamWriter, what, how string) error {
	if r, ok := w.Stopped(); ok {
		return fmt.Errorf("the %s writer stopped after %d chunks: %v", what, w.Synced(), r.Err)
	}
	return fmt.Errorf("the %s writer is %s (%d chunks synced)", what, how, w.Synced())
}
