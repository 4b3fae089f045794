package nbd_test

import (
	"context"
	"testing"
	"time"

	"github.com/purerbd/purerbd/nbd"
	"github.com/purerbd/purerbd/nbd/nbdtest"
)

// gatedBackend holds every write until its gate is closed.
type gatedBackend struct {
	*nbd.Memory
	entered chan struct{}
	gate    chan struct{}
}

func (g *gatedBackend) WriteAt(ctx context.Context, p []byte, off int64) (int, error) {
	g.entered <- struct{}{}
	<-g.gate
	return g.Memory.WriteAt(ctx, p, off)
}

// TestServiceTimes serves one write that the backend holds across two
// windows: the second window's end reports it lingering, the window in
// which it ends reports its service time, and the next one nothing.
func TestServiceTimes(t *testing.T) {
	m, _ := nbd.NewMemory(1 << 20)
	back := &gatedBackend{Memory: m, entered: make(chan struct{}, 1), gate: make(chan struct{})}
	st := nbd.NewServiceTimes()
	srv, err := nbd.NewServer(nbd.Config{Exports: []*nbd.Export{{Backend: back}}, ServiceTimes: st})
	if err != nil {
		t.Fatal(err)
	}
	l, err := nbd.ListenUnix(t.TempDir()+"/s", 0)
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(context.Background(), l)
	defer srv.Close()
	ctx := context.Background()
	c, err := nbdtest.Dial(ctx, "unix", l.Addr().String(), nbdtest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	st.Roll() // the handshake served nothing
	done := make(chan error, 1)
	go func() { done <- c.WriteAt(ctx, make([]byte, 4096), 0, 0) }()
	<-back.entered
	if w := st.Roll(); w.Lingering || w.Longest != 0 {
		t.Fatalf("window in which the write started: %+v, want nothing", w)
	}
	if w := st.Roll(); !w.Lingering || w.Longest != 0 {
		t.Fatalf("window the write spanned: %+v, want lingering", w)
	}
	const held = 30 * time.Millisecond
	time.Sleep(held)
	close(back.gate)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// The reply can reach the client before its handler records the end
	// of the request.
	for deadline := time.Now().Add(10 * time.Second); st.InService() > 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the write's handler never finished")
		}
	}
	if w := st.Roll(); w.Lingering || w.Longest < held {
		t.Fatalf("window in which the write ended: %+v, want its service time (at least %v)", w, held)
	}
	if w := st.Roll(); w.Lingering || w.Longest != 0 {
		t.Fatalf("quiet window: %+v", w)
	}
}
