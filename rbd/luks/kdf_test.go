package luks

import (
	"bytes"
	"os"
	"strconv"
	"testing"

	"github.com/purerbd/purerbd/internal/alloctest"
)

// vmRSS is the process's resident set in KiB.
func vmRSS(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for line := range bytes.Lines(b) {
		if rest, ok := bytes.CutPrefix(line, []byte("VmRSS:")); ok {
			kib, err := strconv.ParseInt(string(bytes.TrimSuffix(bytes.TrimSpace(rest), []byte(" kB"))), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kib
		}
	}
	t.Fatal("no VmRSS in /proc/self/status")
	return 0
}

// TestArgon2MemoryReturned: an Argon2 keyslot's memory goes back to the
// OS when the KDF returns, not minutes later, so that a long-running
// node plugin or NBD server is no larger after an unlock than before.
func TestArgon2MemoryReturned(t *testing.T) {
	if alloctest.RaceEnabled {
		t.Skip("under -race the detector's shadow of the KDF's memory stays resident; measured in the runs without it")
	}
	const memKiB = 128 << 10
	for _, typ := range []string{"argon2id", "argon2i"} {
		k := KDF{Type: typ, Time: 1, Memory: memKiB, CPUs: 2, Salt: make([]byte, 32)}
		before := vmRSS(t)
		key, err := k.derive([]byte("pass word"), 64)
		if err != nil {
			t.Fatal(err)
		}
		after := vmRSS(t)
		t.Logf("%s with %d MiB: VmRSS %d → %d KiB", typ, memKiB>>10, before, after)
		if len(key) != 64 {
			t.Fatalf("%s: key of %d bytes", typ, len(key))
		}
		if after-before > memKiB/4 {
			t.Errorf("%s with %d MiB: the process kept %d KiB more resident after the KDF returned", typ, memKiB>>10, after-before)
		}
	}
}
