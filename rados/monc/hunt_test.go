package monc

import (
	"context"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/purerbd/purerbd/rados/auth"
	"github.com/purerbd/purerbd/rados/denc"
)

func TestAuthErrors(t *testing.T) {
	cl := sharedCluster(t)
	var secret [16]byte
	rand.Read(secret[:])
	for _, tc := range []struct {
		name string
		mut  func(*Config)
	}{
		{"wrong key", func(c *Config) { c.Key = auth.NewCryptoKey(auth.KeyTypeAES, denc.UTime{}, secret[:]) }},
		{"unknown entity", func(c *Config) { c.Name = denc.AuthName{Type: denc.EntityTypeClient, ID: "nobody"} }},
		{"auth none", func(c *Config) { c.AuthNone = true }},
	} {
		t.Run(strings.ReplaceAll(tc.name, " ", "_"), func(t *testing.T) {
			cfg := adminConfig(t, cl)
			cfg.ConnectTimeout = 10 * time.Second
			tc.mut(&cfg)
			t0 := time.Now()
			c, err := New(context.Background(), cfg)
			took := time.Since(t0)
			if err == nil {
				c.Close()
				t.Fatal("connected")
			}
			t.Logf("%s: %v (after %v)", tc.name, err, took.Round(time.Millisecond))
			var ae *auth.Error
			if !errors.Is(err, auth.ErrAuthFailed) || !errors.As(err, &ae) {
				t.Errorf("error does not wrap an auth.Error with auth.ErrAuthFailed")
			}
			var he *HuntError
			if !errors.As(err, &he) || len(he.Attempts) != 1 {
				t.Errorf("want one attempt, got %v", err)
			}
			if took > 3*time.Second {
				t.Errorf("took %v: retried a final error", took)
			}
			if strings.Contains(err.Error(), cl.AdminKey) {
				t.Error("the error reveals the key")
			}
		})
	}
}

// freeAddrs returns n loopback addresses nothing listens on.
func freeAddrs(t testing.TB, n int) []string {
	var out []string
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, l.Addr().String())
		l.Close()
	}
	return out
}

// fakeMon is a TCP listener that misbehaves in the handshake.
type fakeMon struct {
	l  net.Listener
	wg sync.WaitGroup
}

// startFakeMon serves each connection with handle until the test ends.
func startFakeMon(t testing.TB, handle func(net.Conn)) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeMon{l: l}
	var conns sync.Map
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		for {
			nc, err := l.Accept()
			if err != nil {
				return
			}
			conns.Store(nc, true)
			f.wg.Add(1)
			go func() {
				defer f.wg.Done()
				defer nc.Close()
				handle(nc)
			}()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		conns.Range(func(k, _ any) bool { k.(net.Conn).Close(); return true })
		f.wg.Wait()
	})
	return l.Addr().String()
}

// msgr2Banner is what a msgr2.1 peer sends first.
func msgr2Banner() []byte {
	b := []byte("ceph v2\n")
	b = append(b, 16, 0)
	b = append(b, 1, 0, 0, 0, 0, 0, 0, 0) // supported: revision 1
	b = append(b, 1, 0, 0, 0, 0, 0, 0, 0) // required: revision 1
	return b
}

func TestHuntFailures(t *testing.T) {
	cl := sharedCluster(t)
	closeAtOnce := startFakeMon(t, func(nc net.Conn) {})
	closeAfterBanner := startFakeMon(t, func(nc net.Conn) {
		nc.Write(msgr2Banner())
		buf := make([]byte, 26)
		io.ReadFull(nc, buf)           // the client's banner
		nc.Read(make([]byte, 512))     // the start of its HELLO
		nc.(*net.TCPConn).SetLinger(0) // and reset
	})
	silent := startFakeMon(t, func(nc net.Conn) { io.Copy(io.Discard, nc) })
	garbage := startFakeMon(t, func(nc net.Conn) { nc.Write([]byte("HTTP/1.1 400 Bad Request\r\n\r\n")) })

	for _, tc := range []struct {
		name  string
		addrs []string
		want  string // in the error
	}{
		{"unreachable", freeAddrs(t, 2), "connection refused"},
		{"closed at once", []string{closeAtOnce}, "closed the connection during the handshake"},
		{"closed mid-handshake", []string{closeAfterBanner}, closeAfterBanner},
		{"silent", []string{silent}, "deadline"},
		{"not ceph", []string{garbage}, "banner"},
	} {
		t.Run(strings.ReplaceAll(tc.name, " ", "_"), func(t *testing.T) {
			t.Parallel()
			cfg := adminConfig(t, cl)
			cfg.MonAddrs = tc.addrs
			cfg.ConnectTimeout = 2 * time.Second
			cfg.HuntAttemptTimeout = 500 * time.Millisecond
			t0 := time.Now()
			c, err := New(context.Background(), cfg)
			took := time.Since(t0)
			if err == nil {
				c.Close()
				t.Fatal("connected")
			}
			t.Logf("%v (after %v)", err, took.Round(time.Millisecond))
			var he *HuntError
			if !errors.As(err, &he) || !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("want a HuntError ending at the deadline, got %T", err)
			}
			for _, a := range tc.addrs {
				if !strings.Contains(err.Error(), a) {
					t.Errorf("error does not name %s", a)
				}
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error does not say %q", tc.want)
			}
			// a dial that ignored the deadline would take the kernel's
			// minutes; 2 s beyond it leaves room for a loaded machine
			// (3.3 s seen under -race with the load at 30)
			if took > 4*time.Second {
				t.Errorf("took %v, 2 s beyond the 2 s timeout", took)
			}
		})
	}

	// the last attempt, cut short by the deadline, does not hide how the
	// monitor failed before: the first connection is closed at once, the
	// next hangs until the hunt ends
	t.Run("cut short", func(t *testing.T) {
		t.Parallel()
		var accepted atomic.Int32
		closeThenSilent := startFakeMon(t, func(nc net.Conn) {
			if accepted.Add(1) > 1 {
				io.Copy(io.Discard, nc)
			}
		})
		cfg := adminConfig(t, cl)
		cfg.MonAddrs = []string{closeThenSilent}
		cfg.ConnectTimeout = 2 * time.Second
		cfg.HuntAttemptTimeout = 10 * time.Second
		c, err := New(context.Background(), cfg)
		if err == nil {
			c.Close()
			t.Fatal("connected")
		}
		t.Logf("%v", err)
		if want := "closed the connection during the handshake"; !strings.Contains(err.Error(), want) {
			t.Errorf("error does not say %q", want)
		}
		if n := accepted.Load(); n != 2 {
			t.Errorf("%d connections, want 2 (closed, then cut short)", n)
		}
	})

	// a bad monitor among good ones is skipped
	t.Run("one good mon", func(t *testing.T) {
		t.Parallel()
		cfg := adminConfig(t, cl)
		cfg.MonAddrs = append([]string{silent, closeAtOnce}, cl.MonAddrs...)
		cfg.HuntAttemptTimeout = 500 * time.Millisecond
		c := connect(t, cfg)
		if si := c.Session(); si.Mon != "a" {
			t.Errorf("session %+v", si)
		}
	})
}

// TestCloseStopsGoroutines checks that a client with a subscription and
// commands in flight leaves nothing running after Close.
func TestCloseStopsGoroutines(t *testing.T) {
	cl := sharedCluster(t)
	before := runtime.NumGoroutine()
	for i := 0; i < 3; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		c, err := New(ctx, adminConfig(t, cl))
		if err != nil {
			t.Fatal(err)
		}
		sub, err := c.SubscribeOSDMap(0)
		if err != nil {
			t.Fatal(err)
		}
		<-sub.C()
		if _, _, err := c.CommandJSON(ctx, map[string]any{"prefix": "status"}, nil); err != nil {
			t.Fatal(err)
		}
		// a command still waiting when Close comes
		done := make(chan error, 1)
		go func() {
			_, _, err := c.CommandJSON(context.Background(), map[string]any{"prefix": "osd dump"}, nil)
			done <- err
		}()
		c.Close()
		if err := <-done; err != nil && !errors.Is(err, ErrClosed) {
			t.Errorf("command during Close: %v", err)
		}
		if _, _, err := c.CommandJSON(ctx, map[string]any{"prefix": "status"}, nil); !errors.Is(err, ErrClosed) {
			t.Errorf("command after Close: %v", err)
		}
		if _, ok := <-sub.C(); ok {
			t.Error("subscription channel still open")
		}
		cancel()
	}
	waitGoroutines(t, before)
}
