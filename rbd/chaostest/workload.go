package chaostest

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// path is one image reached one way, with its model and its counters.
type path struct {
	name   string // "rbd", "nbd"
	image  string
	model  *model
	target target
	log    *slog.Logger
	hang   time.Duration // an operation running longer is cancelled and counted as hung

	issued, acked, failed, hung atomic.Int64
	verified                    atomic.Int64 // blocks read back and checked
	maxLatency                  atomic.Int64 // nanoseconds

	errMu  sync.Mutex
	errors map[string]int // failures by message
	worst  string         // the slowest operation
}

// opKind names an operation for the error tally.
type opKind string

const (
	opRead  opKind = "read"
	opWrite opKind = "write"
	opZero  opKind = "zero"
	opFlush opKind = "flush"
	opScrub opKind = "scrub"
)

// do runs one operation, counts it and times it. An operation that runs
// past the hang limit is cancelled: it failed, and stalled the caller.
func (p *path) do(ctx context.Context, kind opKind, f func(ctx context.Context) error) error {
	return p.doAt(ctx, kind, -1, 0, f)
}

// doAt is do for an operation on n blocks from first, which the slowest
// operation's description names.
func (p *path) doAt(ctx context.Context, kind opKind, first, n int, f func(ctx context.Context) error) error {
	p.issued.Add(1)
	opCtx, cancel := context.WithCancel(ctx)
	var hung atomic.Bool
	timer := time.AfterFunc(p.hang, func() { hung.Store(true); cancel() })
	t0 := time.Now()
	err := f(opCtx)
	lat := time.Since(t0)
	timer.Stop()
	cancel()
	for {
		cur := p.maxLatency.Load()
		if int64(lat) <= cur {
			break
		}
		if p.maxLatency.CompareAndSwap(cur, int64(lat)) {
			what := fmt.Sprintf("%s of %d blocks at block %d, from %s, %.1f s: %v", kind, n, first,
				t0.Format("15:04:05.000"), lat.Seconds(), err)
			p.errMu.Lock()
			p.worst = what
			p.errMu.Unlock()
			break
		}
	}
	switch {
	case err == nil:
		p.acked.Add(1)
	default:
		p.failed.Add(1)
		if hung.Load() {
			p.hung.Add(1)
			err = fmt.Errorf("hung for %v: %w", p.hang, err)
		}
		p.noteError(kind, err)
	}
	return err
}

func (p *path) noteError(kind opKind, err error) {
	msg := err.Error()
	if len(msg) > 160 {
		msg = msg[:160] + "..."
	}
	key := string(kind) + ": " + msg
	p.errMu.Lock()
	if p.errors == nil {
		p.errors = map[string]int{}
	}
	if len(p.errors) < 200 {
		p.errors[key]++
	} else {
		p.errors["(other errors)"]++
	}
	p.errMu.Unlock()
	p.log.Debug("chaos: operation failed", "path", p.name, "op", kind, "err", err)
}

// pickRange chooses a range of blocks for one operation: mostly a few
// blocks, sometimes up to 64 KiB, rarely up to 1 MiB (across objects).
func pickRange(rng *rand.Rand, blocks int) (first, n int) {
	switch r := rng.IntN(100); {
	case r < 70:
		n = 1 + rng.IntN(4)
	case r < 95:
		n = 5 + rng.IntN(12)
	default:
		n = 17 + rng.IntN(240)
	}
	n = min(n, blocks)
	return rng.IntN(blocks - n + 1), n
}

// reserveRange picks and reserves a free range, or gives up after a few
// tries when the image is crowded.
func (p *path) reserveRange(rng *rand.Rand) (first, n int, ok bool) {
	for range 16 {
		first, n = pickRange(rng, p.model.numBlocks())
		if p.model.reserve(first, n) {
			return first, n, true
		}
	}
	return 0, 0, false
}

// worker issues random operations until stop is closed.
func (p *path) worker(ctx context.Context, rng *rand.Rand, stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		case <-ctx.Done():
			return
		default:
		}
		r := rng.IntN(100)
		if r < 3 {
			p.do(ctx, opFlush, p.target.flush)
			continue
		}
		first, n, ok := p.reserveRange(rng)
		if !ok {
			time.Sleep(time.Millisecond)
			continue
		}
		switch {
		case r < 58:
			p.write(ctx, first, n, false, 0)
		case r < 65:
			p.write(ctx, first, n, true, rng.IntN(2))
		default:
			p.read(ctx, first, n, opRead)
		}
		p.model.release(first, n)
	}
}

// write writes (or zeroes) reserved blocks and records the outcome.
func (p *path) write(ctx context.Context, first, n int, zero bool, how int) {
	vers, buf := p.model.beginWrite(first, n, zero)
	off := int64(first) * BlockSize
	var err error
	if zero {
		err = p.doAt(ctx, opZero, first, n, func(ctx context.Context) error {
			return p.target.zero(ctx, off, int64(n)*BlockSize, how)
		})
	} else {
		err = p.doAt(ctx, opWrite, first, n, func(ctx context.Context) error { return p.target.writeAt(ctx, buf, off) })
	}
	p.model.endWrite(first, vers, err == nil)
}

// read reads reserved blocks back and checks them.
func (p *path) read(ctx context.Context, first, n int, kind opKind) {
	buf := make([]byte, n*BlockSize)
	off := int64(first) * BlockSize
	if err := p.doAt(ctx, kind, first, n, func(ctx context.Context) error { return p.target.readAt(ctx, buf, off) }); err != nil {
		return
	}
	p.verified.Add(int64(n))
	if lost, corrupt, what := p.model.check(first, buf, p.name); lost+corrupt > 0 {
		p.log.Error("chaos: bad data", "path", p.name, "lost", lost, "corrupt", corrupt, "first", what)
	}
}

// scrubber walks the whole image again and again, checking every block.
func (p *path) scrubber(ctx context.Context, stop <-chan struct{}) {
	const chunk = 64 // blocks, 256 KiB
	for first := 0; ; first = (first + chunk) % p.model.numBlocks() {
		select {
		case <-stop:
			return
		case <-ctx.Done():
			return
		default:
		}
		n := min(chunk, p.model.numBlocks()-first)
		if !p.model.reserve(first, n) {
			time.Sleep(time.Millisecond)
			continue
		}
		p.read(ctx, first, n, opScrub)
		p.model.release(first, n)
		// leave the bandwidth to the workers
		time.Sleep(20 * time.Millisecond)
	}
}

// verifyAll reads every block through the path's target and checks it;
// the workload must have stopped.
func (p *path) verifyAll(ctx context.Context) error {
	const chunk = 256 // blocks, 1 MiB
	var failures []string
	for first := 0; first < p.model.numBlocks(); first += chunk {
		n := min(chunk, p.model.numBlocks()-first)
		buf := make([]byte, n*BlockSize)
		off := int64(first) * BlockSize
		var err error
		for attempt := 0; attempt < 3; attempt++ {
			if err = p.do(ctx, opScrub, func(ctx context.Context) error { return p.target.readAt(ctx, buf, off) }); err == nil {
				break
			}
		}
		if err != nil {
			failures = append(failures, fmt.Sprintf("offset %d: %v", off, err))
			if len(failures) > 3 {
				break
			}
			continue
		}
		p.verified.Add(int64(n))
		p.model.check(first, buf, p.name+" (final)")
	}
	if len(failures) > 0 {
		return fmt.Errorf("final read of %s through %s failed: %s", p.image, p.name, strings.Join(failures, "; "))
	}
	return nil
}
