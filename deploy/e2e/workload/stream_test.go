package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// streamFor runs stream on o until d has passed and returns its final
// stats and every line it printed.
func streamFor(t *testing.T, o streamOptions, d time.Duration) (streamStats, []streamStats) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var out bytes.Buffer
	final, err := stream(ctx, o, &out)
	require.NoError(t, err)
	var lines []streamStats
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		var s streamStats
		require.NoError(t, json.Unmarshal(sc.Bytes(), &s), sc.Text())
		lines = append(lines, s)
	}
	require.NotEmpty(t, lines)
	assert.Equal(t, final, lines[len(lines)-1], "the last line is the final stats")
	return final, lines
}

// TestStreamVerify streams records round a small ring, then checks
// verify-stream accepts what was written, tolerates a torn write in
// flight, and catches a damaged or lost acknowledged record.
func TestStreamVerify(t *testing.T) {
	dir := t.TempDir()
	path, logPath := filepath.Join(dir, "ring"), filepath.Join(dir, "log")
	const slots = 8
	o := streamOptions{path: path, size: 4096, seed: 3, slots: slots, logPath: logPath,
		stopWait: 5 * time.Second, progress: 20 * time.Millisecond}
	// The checks below need the ring to have come round and a few
	// progress lines: on a loaded machine, where each synced write may
	// take long, the stream runs again for longer until it has.
	var final streamStats
	var lines []streamStats
	for _, d := range []time.Duration{400 * time.Millisecond, 2 * time.Second, 10 * time.Second, 30 * time.Second} {
		if final, lines = streamFor(t, o, d); final.Writes > 2*slots && len(lines) > 3 {
			break
		}
	}
	assert.True(t, final.Final)
	assert.False(t, final.InFlight)
	assert.Zero(t, final.Errors)
	assert.Greater(t, final.Writes, int64(2*slots), "the ring came round")
	assert.Equal(t, final.Writes-1, final.LastIndex)
	assert.Greater(t, final.MaxStallMS, 0.0)
	assert.Equal(t, slots, final.Slots)
	require.Greater(t, len(lines), 3, "progress lines while streaming")
	for i := 1; i < len(lines); i++ {
		assert.GreaterOrEqual(t, lines[i].Writes, lines[i-1].Writes)
		assert.GreaterOrEqual(t, lines[i].MaxStallMS, lines[i-1].MaxStallMS)
		assert.False(t, lines[i-1].Final)
	}

	// one log line per write, in order
	logged, err := os.ReadFile(logPath)
	require.NoError(t, err)
	entries := bytes.Split(bytes.TrimSpace(logged), []byte("\n"))
	require.Len(t, entries, int(final.Writes))
	var e writeLogEntry
	require.NoError(t, json.Unmarshal(entries[len(entries)-1], &e))
	assert.Equal(t, final.LastIndex, e.Index)
	assert.Equal(t, final.LastIndex%slots, e.Slot)
	assert.Empty(t, e.Error)

	last := final.LastIndex
	vo := verifyStreamOptions{path: path, size: 4096, seed: 3, lastIndex: last, lastKnown: true}
	s, err := verifyStream(vo)
	require.NoError(t, err)
	assert.True(t, s.OK, "%+v", s)
	assert.Equal(t, slots, s.Slots, "the ring size is read from the records")
	assert.Equal(t, last, s.LastIndex)
	assert.EqualValues(t, slots-1, s.Checked)

	flip := func(slot int64) {
		t.Helper()
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		require.NoError(t, err)
		defer f.Close()
		b := []byte{0}
		_, err = f.ReadAt(b, slot*4096+2000)
		require.NoError(t, err)
		b[0] ^= 0x80
		_, err = f.WriteAt(b, slot*4096+2000)
		require.NoError(t, err)
	}
	// a torn write in flight, in the slot after the last record's
	flip((last + 1) % slots)
	s, err = verifyStream(vo)
	require.NoError(t, err)
	assert.True(t, s.OK, "the slot of the write in flight may be torn: %+v", s)

	// stream acknowledged more than the ring holds: lost
	lost := vo
	lost.lastIndex = last + 1
	s, err = verifyStream(lost)
	require.NoError(t, err)
	assert.False(t, s.OK)
	require.NotNil(t, s.FirstBad)
	assert.Equal(t, last+1, *s.FirstBad)
	assert.Contains(t, s.FirstError, "lost")

	// an acknowledged record damaged
	flip((last - 3) % slots)
	s, err = verifyStream(vo)
	require.NoError(t, err)
	assert.False(t, s.OK)
	require.NotNil(t, s.FirstBad)
	assert.Equal(t, last-3, *s.FirstBad)
	assert.Contains(t, s.FirstError, "checksum mismatch")

	// through the command line: exit 1
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"verify-stream", "--path", path, "--size", "4k", "--seed", "3"}, &out, &errb)
	assert.Equal(t, 1, code, errb.String())
	assert.Contains(t, errb.String(), "checksum mismatch")
}

// TestStreamVerifyTornFirstSlot checks that the ring size is found
// when the write in flight tore slot 0, the record verify-stream reads
// it from first (a test run ending there once failed 1 time in 8).
func TestStreamVerifyTornFirstSlot(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ring")
	const slots, size, last = 8, 4096, 15
	f, err := os.Create(path)
	require.NoError(t, err)
	buf := make([]byte, size)
	for index := range int64(last + 1) {
		encodeRecord(buf, recordID{index: uint64(index), seed: 3, ring: slots})
		_, err = f.WriteAt(buf, (index%slots)*size)
		require.NoError(t, err)
	}
	// record 16, in flight to slot 0, torn
	_, err = f.WriteAt([]byte{0xff}, 2000)
	require.NoError(t, err)
	require.NoError(t, f.Close())

	s, err := verifyStream(verifyStreamOptions{path: path, size: size, seed: 3, lastIndex: last, lastKnown: true})
	require.NoError(t, err)
	assert.True(t, s.OK, "%+v", s)
	assert.Equal(t, slots, s.Slots)
	assert.EqualValues(t, last, s.LastIndex)
	assert.EqualValues(t, slots-1, s.Checked)
}

// TestStreamBeforeRingFull checks that a ring not yet come round
// verifies, and that junk in a slot not yet written is caught.
func TestStreamBeforeRingFull(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ring")
	o := streamOptions{path: path, size: 512, seed: 5, slots: 10000, interval: 5 * time.Millisecond,
		stopWait: 5 * time.Second, progress: time.Second}
	final, _ := streamFor(t, o, 200*time.Millisecond)
	require.Greater(t, final.Writes, int64(3))
	s, err := verifyStream(verifyStreamOptions{path: path, size: 512, seed: 5, lastIndex: final.LastIndex, lastKnown: true})
	require.NoError(t, err)
	assert.True(t, s.OK, "%+v", s)
	assert.Equal(t, final.LastIndex+1, s.Checked)

	// a record of a run with another seed, past the end of this one's
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	require.NoError(t, err)
	buf := make([]byte, 512)
	junk := final.LastIndex + 5
	encodeRecord(buf, recordID{index: uint64(junk), seed: 6, ring: 10000})
	_, err = f.WriteAt(buf, junk*512)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	s, err = verifyStream(verifyStreamOptions{path: path, size: 512, seed: 5, lastIndex: final.LastIndex, lastKnown: true})
	require.NoError(t, err)
	assert.False(t, s.OK)
	require.NotNil(t, s.FirstBad)
	assert.Equal(t, junk, *s.FirstBad)
	assert.Contains(t, s.FirstError, "never written")
}

// TestStreamWriteErrors streams into /dev/full, where every write fails:
// the failures are counted and reported, and stream carries on.
func TestStreamWriteErrors(t *testing.T) {
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Fatalf("no /dev/full (every Linux has it): %v", err)
	}
	o := streamOptions{path: "/dev/full", size: 4096, seed: 1, slots: 8,
		stopWait: 5 * time.Second, progress: 50 * time.Millisecond}
	final, lines := streamFor(t, o, 300*time.Millisecond)
	assert.Zero(t, final.Writes)
	assert.Equal(t, int64(-1), final.LastIndex)
	assert.Greater(t, final.Errors, int64(3), "retried after each failure")
	assert.Contains(t, final.LastError, "record 0:")
	assert.Greater(t, len(lines), 2)
}
