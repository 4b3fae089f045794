package bench

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"time"

	"github.com/purerbd/purerbd/nbd/kernel/vmtest"
)

// tlbFlushCounter matches the software-TLB counters of qemu's `info jit`.
var tlbFlushCounter = regexp.MustCompile(`TLB (full|partial) flushes\s+(\d+)`)

// parseTLBFlushes sums the full and partial software-TLB flushes in the
// output of qemu's `info jit`, over all vCPUs. qemu counts a partial
// flush once for each MMU index it cleans; under TCG a guest that loads
// another address space (a process switch on x86) flushes its vCPU's
// TLB, which the vCPU then refills page by page.
func parseTLBFlushes(out string) (float64, error) {
	ms := tlbFlushCounter.FindAllStringSubmatch(out, -1)
	if len(ms) != 2 {
		return 0, fmt.Errorf("bench: no TLB flush counters in qemu's info jit (%d found)", len(ms))
	}
	var n uint64
	for _, m := range ms {
		v, err := strconv.ParseUint(m[2], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("bench: info jit: %w", err)
		}
		n += v
	}
	return float64(n), nil
}

// monitorTimeout bounds one read of qemu's counters at a mark.
const monitorTimeout = 5 * time.Second

// tcgTLBFlushes reads the emulator's software-TLB flushes so far
// through qemu's monitor.
func tcgTLBFlushes(ctx context.Context, m vmtest.Monitor) (float64, error) {
	ctx, cancel := context.WithTimeout(ctx, monitorTimeout)
	defer cancel()
	out, err := m.Do(ctx, "info jit")
	if err != nil {
		return 0, err
	}
	return parseTLBFlushes(out)
}
