package msgr

import (
	"bytes"
	"context"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// faultProxy is a TCP relay between the client and a real Ceph daemon
// that can record, cut or silence the daemon's side, to inject faults
// into real sessions. Tests route Config.DialContext through it.
type faultProxy struct {
	t      testing.TB
	ln     net.Listener
	target string

	cutAfter  atomic.Int64 // close both ends after this many daemon->client bytes (0: never)
	blackhole atomic.Bool  // drop daemon->client bytes
	forwarded atomic.Int64 // daemon->client bytes relayed, over all connections
	holdAt    atomic.Int64 // pause daemon->client bytes when forwarded reaches this (0: no pause)
	holdUp    atomic.Bool  // stop reading client->daemon bytes while set
	closed    atomic.Bool
	mu        sync.Mutex
	recorded  bytes.Buffer // daemon->client bytes, when record is set
	record    bool
	conns     []net.Conn
	wg        sync.WaitGroup
}

func newFaultProxy(t testing.TB, target string) *faultProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &faultProxy{t: t, ln: ln, target: target}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

// dial is a Config.DialContext that goes through the proxy.
func (p *faultProxy) dial(ctx context.Context, network, _ string) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, network, p.ln.Addr().String())
}

func (p *faultProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, s)
		p.mu.Unlock()
		p.wg.Add(2)
		go func() { // client -> daemon
			defer p.wg.Done()
			defer s.Close()
			buf := make([]byte, 32<<10)
			for {
				for p.holdUp.Load() && !p.closed.Load() {
					time.Sleep(time.Millisecond)
				}
				n, err := c.Read(buf)
				if n > 0 {
					if _, werr := s.Write(buf[:n]); werr != nil {
						return
					}
				}
				if err != nil {
					return
				}
			}
		}()
		go func() { // daemon -> client
			defer p.wg.Done()
			defer c.Close()
			defer s.Close()
			buf := make([]byte, 32<<10)
			var sent int64
			for {
				n, err := s.Read(buf)
				if n > 0 {
					chunk := buf[:n]
					if cut := p.cutAfter.Load(); cut > 0 && sent+int64(n) >= cut {
						chunk = chunk[:cut-sent]
						_, _ = c.Write(chunk)
						return
					}
					if p.blackhole.Load() {
						continue
					}
					p.mu.Lock()
					if p.record {
						p.recorded.Write(chunk)
					}
					p.mu.Unlock()
					if !p.relay(c, chunk) {
						return
					}
					sent += int64(n)
				}
				if err != nil {
					return
				}
			}
		}()
	}
}

// relay writes chunk to the client, pausing while holdAt says so; false
// when the client is gone or the proxy closed.
func (p *faultProxy) relay(c net.Conn, chunk []byte) bool {
	for len(chunk) > 0 {
		room := int64(len(chunk))
		if hold := p.holdAt.Load(); hold > 0 {
			room = min(room, hold-p.forwarded.Load())
		}
		if room <= 0 {
			if p.closed.Load() {
				return false
			}
			time.Sleep(time.Millisecond)
			continue
		}
		if _, err := c.Write(chunk[:room]); err != nil {
			return false
		}
		p.forwarded.Add(room)
		chunk = chunk[room:]
	}
	return true
}

// dropAll closes every relayed connection (as if the daemon died).
func (p *faultProxy) dropAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

func (p *faultProxy) close() {
	p.closed.Store(true)
	p.ln.Close()
	p.dropAll()
	p.wg.Wait()
}
