package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"sync"
	"time"
)

// errorBackoff is the least time stream waits before retrying a failed
// write.
const errorBackoff = 10 * time.Millisecond

// streamOptions are the flags of stream: one record at a time into a
// ring of slots, each write made durable before the next, until stopped.
type streamOptions struct {
	path     string
	size     int
	seed     uint64
	slots    int // 0: the device's capacity, or defaultFileSlots for a file
	interval time.Duration
	logPath  string
	direct   bool
	// stopWait bounds how long a stop waits for a write in flight
	// (one stuck on a dead device) before the final line is printed.
	stopWait time.Duration
	progress time.Duration
}

func (o streamOptions) check() error {
	if o.path == "" {
		return errors.New("--path is required")
	}
	if o.slots < 0 {
		return fmt.Errorf("--slots %d: must not be negative", o.slots)
	}
	if o.interval < 0 {
		return fmt.Errorf("--interval %v: must not be negative", o.interval)
	}
	if err := checkSize(o.size); err != nil {
		return err
	}
	return checkDirect(o.size, o.direct)
}

// streamStats is what stream reports each second and at the end. The
// longest stall is the longest single write+sync, counting one still in
// flight. LastIndex is the last record whose write was acknowledged
// (written and synced), -1 before the first.
type streamStats struct {
	ElapsedS   float64 `json:"elapsed_s"`
	Writes     int64   `json:"writes"`
	Errors     int64   `json:"errors"`
	MaxStallMS float64 `json:"max_stall_ms"`
	LastIndex  int64   `json:"last_index"`
	Slots      int     `json:"slots"`
	LastError  string  `json:"last_error,omitempty"`
	// InFlight is set on the final line when a write had not returned
	// by the time stream stopped waiting for it.
	InFlight bool `json:"in_flight,omitempty"`
	Final    bool `json:"final,omitempty"`
}

// streamState is the writer's progress, shared with the reporter.
type streamState struct {
	mu       sync.Mutex
	start    time.Time
	stats    streamStats
	maxStall time.Duration
	inFlight time.Time // start of the write in flight, zero between writes
}

// snapshot returns the stats as of now.
func (st *streamState) snapshot() streamStats {
	st.mu.Lock()
	defer st.mu.Unlock()
	s := st.stats
	stall := st.maxStall
	if !st.inFlight.IsZero() {
		stall = max(stall, time.Since(st.inFlight))
	}
	s.MaxStallMS = ms(stall)
	s.ElapsedS = time.Since(st.start).Seconds()
	return s
}

// writeLogEntry is one line of --log: one write attempt.
type writeLogEntry struct {
	Index     int64   `json:"index"`
	Slot      int64   `json:"slot"`
	Start     string  `json:"start"`
	LatencyMS float64 `json:"latency_ms"`
	Error     string  `json:"error,omitempty"`
}

// streamSlots returns how many record slots the ring has.
func streamSlots(f *os.File, size, slots int) (int, error) {
	c, err := capacity(f)
	if err != nil {
		return 0, err
	}
	if c >= 0 {
		fit := int(c / int64(size))
		if slots == 0 {
			slots = fit
		}
		if slots > fit {
			return 0, fmt.Errorf("%d slots of %d bytes do not fit in %s (%d bytes)", slots, size, f.Name(), c)
		}
	}
	if slots == 0 {
		slots = defaultFileSlots
	}
	if slots < 2 || slots > math.MaxUint32 {
		return 0, fmt.Errorf("a ring of %d records of %d bytes in %s: want 2 to %d", slots, size, f.Name(), uint32(math.MaxUint32))
	}
	return slots, nil
}

// stream writes records 0, 1, 2, ... into slot index%slots until ctx is
// done, printing the stats to out every progress interval and a final
// line when it stops. A failed write is counted and retried with the same
// index after the interval, so the acknowledged records always form an
// unbroken sequence.
func stream(ctx context.Context, o streamOptions, out io.Writer) (streamStats, error) {
	f, err := openTarget(o.path, true, o.direct)
	if err != nil {
		return streamStats{}, err
	}
	defer f.Close()
	slots, err := streamSlots(f, o.size, o.slots)
	if err != nil {
		return streamStats{}, err
	}
	var logw *bufio.Writer
	if o.logPath != "" {
		lf, err := os.Create(o.logPath)
		if err != nil {
			return streamStats{}, fmt.Errorf("write log: %w", err)
		}
		defer lf.Close()
		logw = bufio.NewWriter(lf)
	}
	var logMu sync.Mutex
	flushLog := func() {
		if logw == nil {
			return
		}
		logMu.Lock()
		defer logMu.Unlock()
		logw.Flush()
	}

	st := &streamState{start: time.Now(), stats: streamStats{LastIndex: -1, Slots: slots}}
	enc := json.NewEncoder(out)
	done := make(chan struct{})
	go func() {
		defer close(done)
		writeLoop(ctx, f, o, slots, st, func(e writeLogEntry) {
			if logw == nil {
				return
			}
			logMu.Lock()
			defer logMu.Unlock()
			b, _ := json.Marshal(e)
			logw.Write(append(b, '\n'))
		})
	}()

	tick := time.NewTicker(o.progress)
	defer tick.Stop()
	for running := true; running; {
		select {
		case <-tick.C:
			flushLog()
			if err := enc.Encode(st.snapshot()); err != nil {
				return st.snapshot(), fmt.Errorf("progress line: %w", err)
			}
		case <-ctx.Done():
			running = false
		}
	}
	timer := time.NewTimer(o.stopWait)
	defer timer.Stop()
	final := streamStats{}
	select {
	case <-done:
		final = st.snapshot()
	case <-timer.C:
		final = st.snapshot()
		final.InFlight = true
	}
	final.Final = true
	flushLog()
	if err := enc.Encode(final); err != nil {
		return final, fmt.Errorf("final line: %w", err)
	}
	return final, nil
}

// writeLoop is stream's writer: one record at a time, each synced.
func writeLoop(ctx context.Context, f *os.File, o streamOptions, slots int, st *streamState, logEntry func(writeLogEntry)) {
	buf := alignedBuf(o.size)
	for index := int64(0); ctx.Err() == nil; {
		slot := index % int64(slots)
		encodeRecord(buf, recordID{index: uint64(index), seed: o.seed, ring: uint32(slots)})
		start := time.Now()
		st.mu.Lock()
		st.inFlight = start
		st.mu.Unlock()
		_, err := f.WriteAt(buf, slot*int64(o.size))
		if err == nil {
			err = datasync(f)
		}
		lat := time.Since(start)
		e := writeLogEntry{Index: index, Slot: slot, Start: start.Format(time.RFC3339Nano), LatencyMS: ms(lat)}
		st.mu.Lock()
		st.inFlight = time.Time{}
		st.maxStall = max(st.maxStall, lat)
		if err != nil {
			st.stats.Errors++
			st.stats.LastError = fmt.Sprintf("record %d: %v", index, err)
			e.Error = err.Error()
		} else {
			st.stats.Writes++
			st.stats.LastIndex = index
			index++
		}
		st.mu.Unlock()
		logEntry(e)
		wait := o.interval
		if err != nil {
			// a failing device is retried, but not in a tight loop
			wait = max(wait, errorBackoff)
		}
		if wait > 0 {
			select {
			case <-ctx.Done():
			case <-time.After(wait):
			}
		}
	}
}
