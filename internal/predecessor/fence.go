package predecessor

import (
	"context"
	"errors"
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
		f.addrs, f.err = c.fence(ctx, conn, c.Predecessors(fsid))
		if f.err != nil {
			c.mu.Lock()
			delete(c.fenced, fsid) // the next caller tries again
			c.mu.Unlock()
		}
		close(f.done)
	}
	select {
	case <-f.done:
		return f.addrs, f.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
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
	c.log.Info("predecessor: fenced the dead predecessor's clients", "fsid", conn.FSID(), "fenced", len(done),
		"failed", len(addrs)-len(done), "took", time.Since(start).Round(time.Millisecond), "err", err)
	return done, err
}
