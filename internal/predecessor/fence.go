package predecessor

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/purerbd/purerbd/rados/denc"
)

// Conn is the part of a *rados.Conn that Adopt uses.
type Conn interface {
	FSID() string
	ClientAddr() denc.EntityAddr
	Blocklist(ctx context.Context, addr denc.EntityAddr, expire time.Duration) error
}

// Adopt records conn as one of this process' clients and fences the
// dead predecessors' clients of conn's cluster: it blocklists each of
// their addresses exactly (all at once, and once per cluster for the
// life of the Claim; concurrent callers wait for the first). It returns
// the addresses fenced, for rbd.OpenOptions.FencedClients. An address
// that could not be blocklisted is left out (its locks then break the
// slow way, when its watches time out) and reported in the error, with
// the others still returned.
func (c *Claim) Adopt(ctx context.Context, conn Conn) ([]denc.EntityAddr, error) {
	wait, err := c.AdoptAsync(ctx, conn)
	if err != nil {
		return nil, err
	}
	return wait(ctx)
}

// fenceTimeout bounds a fencing that AdoptAsync runs in the background.
const fenceTimeout = time.Minute

// AdoptAsync is Adopt with the fencing left running: it records conn
// at once (so that a lock conn takes afterwards is one the next process
// fences) and returns a wait that gives what Adopt would have, for
// rbd.OpenOptions.Fencing. The fencing does not end with ctx (a caller
// that only connects must not cancel it); it is bounded by fenceTimeout.
// The monitors commit a blocklist entry at their own pace (up to
// paxos_propose_interval, 1 s by default), which the caller can spend
// opening its images; only breaking a predecessor's lock must wait.
func (c *Claim) AdoptAsync(ctx context.Context, conn Conn) (wait func(context.Context) ([]denc.EntityAddr, error), err error) {
	fsid := conn.FSID()
	if err := c.Record(fsid, conn.ClientAddr()); err != nil {
		return nil, err
	}
	c.mu.Lock()
	f, ok := c.fenced[fsid]
	if !ok {
		f = &fencing{done: make(chan struct{})}
		c.fenced[fsid] = f
	}
	c.mu.Unlock()
	if !ok {
		go func() {
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), fenceTimeout)
			defer cancel()
			f.addrs, f.err = c.fence(fctx, conn, c.Predecessors(fsid))
			if f.err != nil {
				c.mu.Lock()
				delete(c.fenced, fsid) // the next caller tries again
				c.mu.Unlock()
			}
			close(f.done)
		}()
	}
	return func(ctx context.Context) ([]denc.EntityAddr, error) {
		select {
		case <-f.done:
			return f.addrs, f.err
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}, nil
}

// fence blocklists addrs concurrently.
func (c *Claim) fence(ctx context.Context, conn Conn, addrs []denc.EntityAddr) ([]denc.EntityAddr, error) {
	if len(addrs) == 0 {
		return nil, nil
	}
	start := time.Now()
	errs := make([]error, len(addrs))
	var wg sync.WaitGroup
	for i, a := range addrs {
		wg.Go(func() { errs[i] = conn.Blocklist(ctx, a, 0) })
	}
	wg.Wait()
	var done []denc.EntityAddr
	for i, a := range addrs {
		if errs[i] == nil {
			done = append(done, a)
		}
	}
	err := errors.Join(errs...)
	level := slog.LevelInfo
	if err != nil {
		level = slog.LevelWarn // their locks break only when their watches time out
	}
	c.log.Log(ctx, level, "predecessor: fenced the dead predecessor's clients", "fsid", conn.FSID(), "fenced", len(done),
		"failed", len(addrs)-len(done), "took", time.Since(start).Round(time.Millisecond), "err", err)
	return done, err
}
