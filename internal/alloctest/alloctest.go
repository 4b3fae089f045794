// Package alloctest checks, inside fuzz targets and tests, that a decoder
// of untrusted bytes allocates no more heap than a fixed multiple of the
// bytes it was given: a peer that sends a few kilobytes must not make the
// process allocate megabytes. Every fuzz target of the module wraps its
// decode in Check, so `go test` checks the property on the seed corpus and
// `go test -fuzz` on every input the fuzzer tries.
//
// The measurement is runtime.MemStats.TotalAlloc before and after the
// decode. It counts the whole process, so a goroutine left running by
// another test can add to it: an input over the bound is measured again
// and only fails if every measurement is over.
package alloctest

import (
	"runtime"
	"testing"
)

const (
	// Factor is the most heap bytes a decoder may allocate per input
	// byte. A decoder that checks each count against the bytes that
	// remain times the smallest encoding of one element allocates a
	// small multiple of its input (Go's slice, string and map headers
	// and map buckets are larger than the encodings they hold); one that
	// sizes an allocation from a count or a value alone allocates
	// without bound.
	Factor = 16
	// Slack is the fixed allowance on top: the decoded structs
	// themselves and the empty maps and small buffers a decoder makes
	// whatever its input.
	Slack = 8 << 10
	// tries is how many measurements an input over the bound gets
	// before it fails.
	tries = 3
)

// Limit returns the most heap bytes a decode of n input bytes may
// allocate.
func Limit(n int) uint64 { return uint64(n)*Factor + Slack }

// Measure returns the heap bytes decode allocated (the smallest of up to
// tries runs, when the first is over the limit for n bytes). decode may
// run more than once: it must do the same work each time.
func Measure(n int, decode func()) uint64 { return measure(n, 0, decode) }

func measure(n int, extra uint64, decode func()) uint64 {
	best := ^uint64(0)
	for i := 0; i < tries; i++ {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		decode()
		runtime.ReadMemStats(&after)
		best = min(best, after.TotalAlloc-before.TotalAlloc)
		if best <= Limit(n)+extra {
			break
		}
	}
	return best
}

// Check runs decode, which decodes n bytes of untrusted input, and fails
// t when it allocated more than Limit(n) heap bytes.
func Check(t testing.TB, n int, decode func()) {
	t.Helper()
	CheckAllowing(t, n, 0, decode)
}

// CheckAllowing is Check for a decoder that may also allocate extra bytes
// whatever its input says: the fixed buffers of a connection a server
// decodes from, say. Callers name what extra is for.
func CheckAllowing(t testing.TB, n int, extra uint64, decode func()) {
	t.Helper()
	if RaceEnabled {
		// Measured in the runs without -race (go test, fuzz smoke);
		// here the decode still runs for the race detector to watch.
		decode()
		return
	}
	got := measure(n, extra, decode)
	if got > Limit(n)+extra {
		t.Fatalf("decoding %d bytes allocated %d heap bytes, more than %d per input byte plus %d (and %d allowed extra)",
			n, got, Factor, Slack, extra)
	}
}
