package hugebuf

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"unsafe"
)

// anonHugeKB returns the AnonHugePages of the mapping holding p, from
// /proc/self/smaps.
func anonHugeKB(t *testing.T, p []byte) int {
	t.Helper()
	addr := uint64(uintptr(unsafe.Pointer(unsafe.SliceData(p))))
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	in := false
	for sc.Scan() {
		line := sc.Text()
		var lo, hi uint64
		if n, _ := fmt.Sscanf(line, "%x-%x ", &lo, &hi); n == 2 { // a mapping's first line
			in = lo <= addr && addr < hi
			continue
		}
		if in && strings.HasPrefix(line, "AnonHugePages:") {
			kb, err := strconv.Atoi(strings.Fields(line)[1])
			if err != nil {
				t.Fatalf("smaps: %q: %v", line, err)
			}
			return kb
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	t.Fatalf("no mapping of %#x in /proc/self/smaps", addr)
	return 0
}

// TestHugePages checks that a touched buffer is backed by huge pages
// (the mapping's AnonHugePages in /proc/self/smaps) where the kernel
// offers them on request, and that it is a mapping of its own, working
// on small pages, where transparent huge pages are off.
func TestHugePages(t *testing.T) {
	mode, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
	thp := err == nil && !strings.Contains(string(mode), "[never]")
	b := Alloc(8 << 20)
	defer b.Free()
	if !b.Huge() {
		t.Fatal("an 8 MiB buffer is not a mapping of its own")
	}
	p := b.Bytes()
	for i := 0; i < len(p); i += 4096 {
		p[i] = 1
	}
	kb := anonHugeKB(t, p)
	t.Logf("transparent huge pages %q: %d kB of 8192 in huge pages", strings.TrimSpace(string(mode)), kb)
	switch {
	case thp && kb < 2048:
		t.Fatalf("an 8 MiB buffer, touched, has %d kB in huge pages", kb)
	case !thp && kb != 0:
		t.Fatalf("huge pages off, yet %d kB in huge pages", kb)
	}
}
