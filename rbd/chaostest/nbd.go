package chaostest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/purerbd/purerbd/nbd"
	"github.com/purerbd/purerbd/nbd/nbdtest"
)

// exportName is the name the NBD server gives the image.
const exportName = "chaos"

// nbdExport is the userspace NBD server exporting one image on a Unix
// socket; kill and start model the server process dying and coming back.
type nbdExport struct {
	path   string
	export *nbd.Export
	log    *slog.Logger

	mu   sync.Mutex
	srv  *nbd.Server
	done chan struct{} // closed when the current Serve returned
}

func (e *nbdExport) start(ctx context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.srv != nil {
		return nil
	}
	srv, err := nbd.NewServer(nbd.Config{Exports: []*nbd.Export{e.export}, Logger: e.log})
	if err != nil {
		return fmt.Errorf("nbd server: %w", err)
	}
	l, err := nbd.ListenUnix(e.path, 0)
	if err != nil {
		return fmt.Errorf("nbd server: %w", err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ctx, l); err != nil && !errors.Is(err, nbd.ErrServerClosed) && ctx.Err() == nil {
			e.log.Warn("chaos: nbd server stopped", "err", err)
		}
	}()
	e.srv, e.done = srv, done
	return nil
}

// kill aborts the server as a crash would: connections are cut, requests
// in flight get no reply. It returns once every request the server was
// running has returned from the image.
func (e *nbdExport) kill() {
	e.mu.Lock()
	srv, done := e.srv, e.done
	e.srv, e.done = nil, nil
	e.mu.Unlock()
	if srv == nil {
		return
	}
	srv.Close()
	<-done
}

// gate holds back the reads of a connection while closed: the client is
// a slow consumer of its replies.
type gate struct {
	mu sync.Mutex
	ch chan struct{} // nil when open; closed when opened again
}

func (g *gate) close() {
	g.mu.Lock()
	if g.ch == nil {
		g.ch = make(chan struct{})
	}
	g.mu.Unlock()
}

func (g *gate) open() {
	g.mu.Lock()
	if g.ch != nil {
		close(g.ch)
		g.ch = nil
	}
	g.mu.Unlock()
}

func (g *gate) wait() {
	g.mu.Lock()
	ch := g.ch
	g.mu.Unlock()
	if ch != nil {
		<-ch
	}
}

type gatedConn struct {
	net.Conn
	g *gate
}

func (c gatedConn) Read(p []byte) (int, error) {
	c.g.wait()
	return c.Conn.Read(p)
}

// nbdSlot is one client connection, dialled again whenever it breaks.
type nbdSlot struct {
	gate gate
	mu   sync.Mutex
	c    *nbdtest.Client
}

// nbdTarget is an NBD client of the export with a few connections;
// requests that die with their connection (server killed) are retried on
// a new one, as the kernel requeues them after a reconnect.
type nbdTarget struct {
	path       string
	slots      []*nbdSlot
	next       atomic.Uint64
	reconnects atomic.Int64
	retries    atomic.Int64
}

func newNBDTarget(path string, conns int) *nbdTarget {
	t := &nbdTarget{path: path}
	for range conns {
		t.slots = append(t.slots, &nbdSlot{})
	}
	return t
}

// client returns the slot's connection, dialling until the server
// answers or ctx ends.
func (t *nbdTarget) client(ctx context.Context, s *nbdSlot) (*nbdtest.Client, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.c != nil {
		select {
		case <-s.c.Done():
			s.c.Conn().Close()
			s.c = nil
		default:
			return s.c, nil
		}
	}
	for delay := 20 * time.Millisecond; ; delay = min(2*delay, time.Second) {
		c, err := t.dial(ctx, s)
		if err == nil {
			s.c = c
			t.reconnects.Add(1)
			return c, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("nbd: connecting to %s: %w (last: %v)", t.path, ctx.Err(), err)
		case <-time.After(delay):
		}
	}
}

func (t *nbdTarget) dial(ctx context.Context, s *nbdSlot) (*nbdtest.Client, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", t.path)
	if err != nil {
		return nil, err
	}
	// the handshake must not outlive ctx or hang on a dying server
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	c, err := nbdtest.Handshake(gatedConn{Conn: conn, g: &s.gate}, nbdtest.Options{Export: exportName})
	if err != nil {
		conn.Close()
		return nil, err
	}
	conn.SetDeadline(time.Time{})
	return c, nil
}

// drop forgets a broken connection.
func (s *nbdSlot) drop(c *nbdtest.Client) {
	s.mu.Lock()
	if s.c == c {
		s.c = nil
	}
	s.mu.Unlock()
	c.Conn().Close()
}

// do runs one request, on a new connection again when its connection
// died under it. An error the server replied with is returned as is,
// except NBD_ESHUTDOWN (the server refused it while going away).
func (t *nbdTarget) do(ctx context.Context, cmd nbdtest.Cmd) error {
	s := t.slots[t.next.Add(1)%uint64(len(t.slots))]
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			t.retries.Add(1)
		}
		c, err := t.client(ctx, s)
		if err != nil {
			return err
		}
		_, err = c.Do(ctx, cmd)
		if err == nil {
			return nil
		}
		var re *nbdtest.ReplyError
		if errors.As(err, &re) && re.Errno != nbdtest.ESHUTDOWN {
			return err
		}
		if ctx.Err() != nil {
			return err
		}
		// the connection failed under the request, or the server is
		// going away: start over on a new connection
		s.drop(c)
	}
}

func (t *nbdTarget) readAt(ctx context.Context, p []byte, off int64) error {
	return t.do(ctx, nbdtest.Cmd{Type: nbdtest.CmdRead, Offset: uint64(off), Length: uint32(len(p)), Buf: p})
}

func (t *nbdTarget) writeAt(ctx context.Context, p []byte, off int64) error {
	return t.do(ctx, nbdtest.Cmd{Type: nbdtest.CmdWrite, Offset: uint64(off), Data: p})
}

func (t *nbdTarget) zero(ctx context.Context, off, n int64, how int) error {
	typ := uint16(nbdtest.CmdWriteZeroes)
	if how%2 == 0 {
		typ = nbdtest.CmdTrim
	}
	return t.do(ctx, nbdtest.Cmd{Type: typ, Offset: uint64(off), Length: uint32(n)})
}

func (t *nbdTarget) flush(ctx context.Context) error {
	return t.do(ctx, nbdtest.Cmd{Type: nbdtest.CmdFlush})
}

// slowConsumer stops reading replies on one connection for d.
func (t *nbdTarget) slowConsumer(ctx context.Context, slot int, d time.Duration) {
	g := &t.slots[slot%len(t.slots)].gate
	g.close()
	defer g.open()
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// close ends every connection cleanly.
func (t *nbdTarget) close() {
	for _, s := range t.slots {
		s.gate.open()
		s.mu.Lock()
		if s.c != nil {
			s.c.Close()
			s.c = nil
		}
		s.mu.Unlock()
	}
}
