package nbd_test

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/purerbd/purerbd/nbd"
	"github.com/purerbd/purerbd/nbd/nbdtest"
)

func TestTCPLoopbackDefaultExport(t *testing.T) {
	m, _ := nbd.NewMemory(1 << 20)
	srv, err := nbd.NewServer(nbd.Config{Exports: []*nbd.Export{{Name: "disk", Backend: m}}, DefaultExport: "disk"})
	if err != nil {
		t.Fatal(err)
	}
	l, err := nbd.ListenTCP("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(context.Background(), l) }()
	defer func() {
		srv.Close()
		if err := <-served; !errors.Is(err, nbd.ErrServerClosed) {
			t.Errorf("Serve: %v", err)
		}
	}()
	for _, o := range []nbdtest.Options{{}, {ExportName: true}} {
		c, err := nbdtest.Dial(context.Background(), "tcp", l.Addr().String(), o)
		if err != nil {
			t.Fatal(err)
		}
		if c.Size != 1<<20 {
			t.Fatalf("default export size %d", c.Size)
		}
		if tc, ok := c.Conn().(*net.TCPConn); !ok || !tc.RemoteAddr().(*net.TCPAddr).IP.IsLoopback() {
			t.Fatalf("not a loopback TCP connection")
		}
		if err := c.WriteAt(context.Background(), []byte("tcp"), 0, 0); err != nil {
			t.Fatal(err)
		}
		c.Close()
	}
}

func TestMinimumBlockSize(t *testing.T) {
	m, _ := nbd.NewMemory(1 << 20)
	srv := nbdtest.Start(t, nbd.Config{Exports: []*nbd.Export{{Name: "e", Backend: m, MinBlockSize: 512, PreferredBlockSize: 4096, MaxPayload: 1 << 20}}})
	c := dial(t, srv, nbdtest.Options{Export: "e"})
	if c.MinBlock != 512 || c.PrefBlock != 4096 || c.MaxPL != 1<<20 {
		t.Fatalf("block sizes %d %d %d", c.MinBlock, c.PrefBlock, c.MaxPL)
	}
	ctx := context.Background()
	var re *nbdtest.ReplyError
	if err := c.ReadAt(ctx, make([]byte, 512), 100); !errors.As(err, &re) || re.Errno != nbdtest.EINVAL {
		t.Fatalf("unaligned read: %v", err)
	}
	if err := c.ReadAt(ctx, make([]byte, 2<<20), 0); !errors.As(err, &re) || re.Errno != nbdtest.EINVAL {
		t.Fatalf("read over the export's max payload: %v", err)
	}
	if err := c.ReadAt(ctx, make([]byte, 1024), 512); err != nil {
		t.Fatalf("aligned read: %v", err)
	}
	for _, bad := range []nbd.Export{
		{Backend: m, MinBlockSize: 3},
		{Backend: m, MinBlockSize: 128 << 10},
		{Backend: m, PreferredBlockSize: 256},
		{Backend: m, MaxPayload: 64 << 20},
		{},
	} {
		if _, err := bad.TransmissionFlags(); err == nil {
			t.Errorf("export %+v accepted", bad)
		}
	}
	f, err := (&nbd.Export{Backend: m}).TransmissionFlags()
	const want = 1 | 1<<2 | 1<<3 | 1<<5 | 1<<6 | 1<<8 | 1<<10 | 1<<11
	if err != nil || f != want {
		t.Fatalf("memory export flags %#x, want %#x (%v)", f, want, err)
	}
}

// TestTransmitting: Transmitting counts the connections past their
// handshake, and not those still in it or ended.
func TestTransmitting(t *testing.T) {
	m, _ := nbd.NewMemory(1 << 20)
	srv, err := nbd.NewServer(nbd.Config{Exports: []*nbd.Export{{Backend: m}}})
	if err != nil {
		t.Fatal(err)
	}
	l, err := nbd.ListenUnix(t.TempDir()+"/s", 0)
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(context.Background(), l)
	defer srv.Close()
	await := func(want int) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for srv.Transmitting() != want {
			if time.Now().After(deadline) {
				t.Fatalf("Transmitting() = %d, want %d", srv.Transmitting(), want)
			}
			time.Sleep(time.Millisecond)
		}
	}
	ctx := context.Background()
	var cs []*nbdtest.Client
	for i := range 3 {
		c, err := nbdtest.Dial(ctx, "unix", l.Addr().String(), nbdtest.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.WriteAt(ctx, []byte("x"), int64(i), 0); err != nil {
			t.Fatal(err)
		}
		cs = append(cs, c)
		await(i + 1)
	}
	// in the handshake: not counted
	raw, err := net.Dial("unix", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	if _, err := nbdtest.ReadGreeting(raw); err != nil {
		t.Fatal(err)
	}
	await(3)
	for i, c := range cs {
		c.Close()
		await(2 - i)
	}
}
