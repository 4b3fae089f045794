package nbd_test

import (
	"context"
	"errors"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/purerbd/purerbd/nbd"
	"github.com/purerbd/purerbd/nbd/nbdtest"
)

// gated is a memory backend whose reads and writes at or past gateFrom
// wait for the gate to open, and which records concurrency and flushes.
type gated struct {
	*nbd.Memory
	gateFrom int64
	gate     chan struct{}
	entered  chan int64 // offsets of gated calls, as they start

	cur, peak atomic.Int64
	flushes   atomic.Int64
	writesOK  atomic.Int64 // writes completed
	flushSaw  atomic.Int64 // writes completed when the last flush ran
}

func newGated(t *testing.T, size, gateFrom int64) *gated {
	m, err := nbd.NewMemory(size)
	if err != nil {
		t.Fatal(err)
	}
	return &gated{Memory: m, gateFrom: gateFrom, gate: make(chan struct{}), entered: make(chan int64, 1024)}
}

func (g *gated) wait(ctx context.Context, off int64) error {
	n := g.cur.Add(1)
	defer g.cur.Add(-1)
	for {
		p := g.peak.Load()
		if n <= p || g.peak.CompareAndSwap(p, n) {
			break
		}
	}
	if off < g.gateFrom {
		return nil
	}
	g.entered <- off
	select {
	case <-g.gate:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (g *gated) ReadAt(ctx context.Context, p []byte, off int64) (int, error) {
	if err := g.wait(ctx, off); err != nil {
		return 0, err
	}
	return g.Memory.ReadAt(ctx, p, off)
}

func (g *gated) WriteAt(ctx context.Context, p []byte, off int64) (int, error) {
	if err := g.wait(ctx, off); err != nil {
		return 0, err
	}
	n, err := g.Memory.WriteAt(ctx, p, off)
	g.writesOK.Add(1)
	return n, err
}

func (g *gated) Flush(ctx context.Context) error {
	g.flushes.Add(1)
	g.flushSaw.Store(g.writesOK.Load())
	return nil
}

func startGated(t *testing.T, g *gated, cfg nbd.Config) *nbdtest.Server {
	cfg.Exports = []*nbd.Export{{Name: "g", Backend: g}}
	return nbdtest.Start(t, cfg)
}

func TestRepliesOutOfOrder(t *testing.T) {
	g := newGated(t, 1<<20, 512<<10)
	srv := startGated(t, g, nbd.Config{})
	c := dial(t, srv, nbdtest.Options{Export: "g"})
	ctx := context.Background()
	slow := make(chan error, 1)
	go func() { slow <- c.ReadAt(ctx, make([]byte, 4096), 512<<10) }()
	<-g.entered // the slow read is in the backend
	// Later requests are answered while the first one waits.
	for i := range 10 {
		if err := c.ReadAt(ctx, make([]byte, 4096), int64(i)*4096); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case err := <-slow:
		t.Fatalf("gated read finished before the gate opened: %v", err)
	default:
	}
	close(g.gate)
	if err := <-slow; err != nil {
		t.Fatal(err)
	}
}

func TestInFlightBounded(t *testing.T) {
	g := newGated(t, 1<<20, 0)
	srv := startGated(t, g, nbd.Config{MaxInFlight: 4})
	c := dial(t, srv, nbdtest.Options{Export: "g"})
	ctx := context.Background()
	var wg sync.WaitGroup
	for i := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := c.ReadAt(ctx, make([]byte, 512), int64(i)*512); err != nil {
				t.Error(err)
			}
		}()
	}
	for range 4 {
		<-g.entered
	}
	time.Sleep(50 * time.Millisecond) // a fifth would have entered by now
	if n := g.cur.Load(); n != 4 {
		t.Fatalf("%d requests in the backend, want 4", n)
	}
	close(g.gate)
	wg.Wait()
	if p := g.peak.Load(); p > 4 {
		t.Fatalf("peak of %d requests in the backend, limit 4", p)
	}
}

func TestFUAAndFlush(t *testing.T) {
	g := newGated(t, 1<<20, 1<<62)
	srv := startGated(t, g, nbd.Config{})
	c := dial(t, srv, nbdtest.Options{Export: "g"})
	ctx := context.Background()
	if c.Flags&nbdtest.TFlagSendFUA == 0 || c.Flags&nbdtest.TFlagSendFlush == 0 {
		t.Fatalf("flags %#x lack FLUSH/FUA", c.Flags)
	}
	for i := range 8 {
		if err := c.WriteAt(ctx, make([]byte, 4096), int64(i)*4096, 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if g.flushes.Load() != 1 || g.flushSaw.Load() != 8 {
		t.Fatalf("flush ran %d times, after %d of 8 writes", g.flushes.Load(), g.flushSaw.Load())
	}
	if err := c.WriteAt(ctx, make([]byte, 4096), 0, nbdtest.CmdFlagFUA); err != nil {
		t.Fatal(err)
	}
	if g.flushes.Load() != 2 || g.flushSaw.Load() != 9 {
		t.Fatalf("FUA write answered before its flush")
	}
}

func TestShutdownNegotiated(t *testing.T) {
	g := newGated(t, 1<<20, 512<<10)
	srv := startGated(t, g, nbd.Config{})
	c := dial(t, srv, nbdtest.Options{Export: "g", Structured: true})
	ctx := context.Background()
	inflight := make(chan error, 1)
	go func() { inflight <- c.WriteAt(ctx, make([]byte, 4096), 512<<10, 0) }()
	<-g.entered

	shut := make(chan error, 1)
	go func() { shut <- srv.Shutdown(context.Background()) }()
	// New requests are refused with ESHUTDOWN while the write is in flight.
	deadline := time.Now().Add(5 * time.Second)
	for {
		err := c.ReadAt(ctx, make([]byte, 512), 0)
		var re *nbdtest.ReplyError
		if errors.As(err, &re) && re.Errno == nbdtest.ESHUTDOWN {
			break
		}
		if err != nil || time.Now().After(deadline) {
			t.Fatalf("read during shutdown: %v", err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	close(g.gate)
	if err := <-inflight; err != nil {
		t.Fatalf("in-flight write during shutdown: %v", err)
	}
	if err := <-shut; err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	select {
	case <-c.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("connection still open after Shutdown")
	}
	if _, err := net.Dial("unix", srv.Socket); err == nil {
		t.Fatal("server still accepts after Shutdown")
	}
}

func TestShutdownHandshake(t *testing.T) {
	srv, _ := nbdtest.StartMemory(t, "e", 1<<20)
	r := dialRaw(t, srv)
	r.greet(nbdtest.FlagFixedNewstyle)
	r.expectOpt(nbdtest.OptList, nil, nbdtest.RepAck)
	shut := make(chan error, 1)
	go func() { shut <- srv.Shutdown(context.Background()) }()
	// Give the shutdown time to reach the session.
	time.Sleep(50 * time.Millisecond)
	r.expectOpt(nbdtest.OptGo, nbdtest.InfoData("e"), nbdtest.RepErrShutdown)
	r.expectOpt(nbdtest.OptAbort, nil, nbdtest.RepAck)
	if err := <-shut; err != nil {
		t.Fatal(err)
	}
}

// socketPair returns two connected Unix stream sockets.
func socketPair(t *testing.T) (net.Conn, net.Conn) {
	t.Helper()
	dir := t.TempDir()
	l, err := net.Listen("unix", dir+"/pair.sock")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	acc := make(chan net.Conn, 1)
	go func() {
		c, _ := l.Accept()
		acc <- c
	}()
	a, err := net.Dial("unix", dir+"/pair.sock")
	if err != nil {
		t.Fatal(err)
	}
	b := <-acc
	if b == nil {
		t.Fatal("accept failed")
	}
	return a, b
}

func TestServeTransmissionKernelShutdown(t *testing.T) {
	g := newGated(t, 1<<20, 512<<10)
	srv, err := nbd.NewServer(nbd.Config{})
	if err != nil {
		t.Fatal(err)
	}
	client, server := socketPair(t)
	served := make(chan error, 1)
	go func() { served <- srv.ServeTransmission(context.Background(), server, &nbd.Export{Backend: g}) }()
	c := nbdtest.NewTransmission(client)
	defer client.Close()
	ctx := context.Background()
	data := []byte("kernel-style write")
	if err := c.WriteAt(ctx, data, 4096, 0); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(data))
	if err := c.ReadAt(ctx, got, 4096); err != nil || string(got) != string(data) {
		t.Fatalf("read %q, %v", got, err)
	}
	inflight := make(chan error, 1)
	go func() { inflight <- c.WriteAt(ctx, data, 512<<10, 0) }()
	<-g.entered
	shut := make(chan error, 1)
	go func() { shut <- srv.Shutdown(context.Background()) }()
	time.Sleep(50 * time.Millisecond)
	// The connection is not idle (the write is in flight), so a request
	// sent now is still read and answered: the kernel would otherwise
	// wait for its request timeout before resending it.
	if err := c.ReadAt(ctx, got, 4096); err != nil || string(got) != string(data) {
		t.Fatalf("read during the handover: %q, %v", got, err)
	}
	select {
	case err := <-shut:
		t.Fatalf("Shutdown returned with a request in flight: %v", err)
	default:
	}
	close(g.gate)
	if err := <-inflight; err != nil {
		t.Fatalf("in-flight write: %v", err)
	}
	// Idle now: the read side is shut and the connection closes.
	if err := <-shut; err != nil {
		t.Fatal(err)
	}
	if err := <-served; err != nil {
		t.Fatalf("ServeTransmission: %v", err)
	}
	// A request sent after the handover fails on the client's side (the
	// kernel then requeues it) instead of waiting for an answer.
	err = c.ReadAt(ctx, make([]byte, 512), 0)
	var re *nbdtest.ReplyError
	if err == nil || errors.As(err, &re) {
		t.Fatalf("request after the handover: %v", err)
	}
}

// TestServeTransmissionKernelHandoverIdle checks that Shutdown of an idle
// kernel connection returns at once and that the client's next send
// fails, so that the kernel requeues the request rather than waiting
// for an answer that never comes.
func TestServeTransmissionKernelHandoverIdle(t *testing.T) {
	srv, err := nbd.NewServer(nbd.Config{})
	if err != nil {
		t.Fatal(err)
	}
	mem, err := nbd.NewMemory(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	client, server := socketPair(t)
	defer client.Close()
	served := make(chan error, 1)
	go func() { served <- srv.ServeTransmission(context.Background(), server, &nbd.Export{Backend: mem}) }()
	c := nbdtest.NewTransmission(client)
	ctx := context.Background()
	if err := c.WriteAt(ctx, []byte("before"), 0, 0); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := srv.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Shutdown of an idle kernel connection took %v", d)
	}
	if err := <-served; err != nil {
		t.Fatalf("ServeTransmission: %v", err)
	}
	// The raw send fails: the server shut its read side.
	_, err = client.Write(nbdtest.Request(0, 0, 99, 0, 512, nil))
	if err == nil {
		// The server may have closed the connection altogether: then
		// the failure shows on the next write or read.
		_, err = client.Write(nbdtest.Request(0, 0, 100, 0, 512, nil))
	}
	if err == nil {
		t.Fatal("the client could still send after the handover")
	}
}

func TestCloseLeavesNoGoroutines(t *testing.T) {
	before := runtime.NumGoroutine()
	g := newGated(t, 1<<20, 512<<10)
	srv, err := nbd.NewServer(nbd.Config{Exports: []*nbd.Export{{Name: "g", Backend: g}}})
	if err != nil {
		t.Fatal(err)
	}
	l, err := nbd.ListenUnix(t.TempDir()+"/s", 0)
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(context.Background(), l) }()
	var clients []*nbdtest.Client
	for range 3 {
		c, err := nbdtest.Dial(context.Background(), "unix", l.Addr().String(), nbdtest.Options{Export: "g"})
		if err != nil {
			t.Fatal(err)
		}
		clients = append(clients, c)
		go c.ReadAt(context.Background(), make([]byte, 512), 512<<10) // stuck in the backend
	}
	for range 3 {
		<-g.entered
	}
	srv.Close() // cancels the stuck reads through their context
	if err := <-served; !errors.Is(err, nbd.ErrServerClosed) {
		t.Fatalf("Serve: %v", err)
	}
	for _, c := range clients {
		<-c.Done()
	}
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<16)
			t.Fatalf("%d goroutines before, %d after Close:\n%s", before, runtime.NumGoroutine(), buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond)
	}
}
