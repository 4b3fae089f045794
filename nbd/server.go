package nbd

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/purerbd/purerbd/internal/bufpool"
)

// Config configures a Server. The zero value serves nothing until exports
// are added, without TLS.
type Config struct {
	// Exports are offered from the start; more can be added with AddExport.
	Exports []*Export
	// DefaultExport names the export a client gets when it asks for the
	// empty name and no export is named "". Empty means none.
	DefaultExport string

	// TLSConfig enables NBD_OPT_STARTTLS. With RequireTLS every option
	// but STARTTLS and ABORT is refused with NBD_REP_ERR_TLS_REQD until
	// TLS is up (the protocol's FORCEDTLS mode). To admit only clients
	// holding a certificate, set ClientAuth to RequireAndVerifyClientCert
	// and ClientCAs; that needs RequireTLS, or a client that never starts
	// TLS would skip the check.
	TLSConfig  *tls.Config
	RequireTLS bool

	// MaxInFlight bounds the requests served at once on one connection
	// (default 128, the kernel's queue depth); MaxInFlightBytes bounds the
	// payload bytes they hold (default 128 MiB).
	MaxInFlight      int
	MaxInFlightBytes int64

	// MaxReplyBytes bounds the READ data one connection holds for its
	// client, from the moment a request is read until its reply is sent
	// (default DefaultMaxReplyBytes). A client that sends READs and does
	// not read the replies stops being read once this much waits for it,
	// so it cannot make the server hold more. A single READ larger than
	// the bound is served alone.
	MaxReplyBytes int64

	// MaxConns bounds the connections that Serve has open at once, in the
	// handshake or past it, over all its listeners (default
	// DefaultMaxConns; negative: no bound). A connection accepted beyond
	// it is closed at once and logged. Connections passed to ServeConn or
	// ServeTransmission by the caller are not counted.
	MaxConns int

	// HandshakeTimeout bounds the whole option haggling, TLS included
	// (default DefaultHandshakeTimeout): a client that has not chosen an
	// export by then is disconnected.
	HandshakeTimeout time.Duration

	// ServiceTimes, when set, is fed the service time of every request
	// served in the transmission phase (see ServiceTimes).
	ServiceTimes *ServiceTimes

	// Observer, when set, is told of every request served in the
	// transmission phase (see Observer).
	Observer Observer

	// Buffers, when set, lends the buffers that WRITE payloads are read
	// into and READ replies built in. A process running many servers
	// (a device per volume) passes them one pool, so that a burst of
	// writes to one export reuses the buffers another's left, instead
	// of every server growing its own until the garbage collector takes
	// them back. nil: the server keeps its own pool.
	Buffers BufferPool

	// Logger receives connection events; nil logs nothing.
	Logger *slog.Logger
}

// Defaults of the Config bounds.
const (
	DefaultMaxReplyBytes    = 32 << 20
	DefaultMaxConns         = 16
	DefaultHandshakeTimeout = 30 * time.Second
)

// BufferPool lends byte buffers (Config.Buffers). Get returns a buffer
// of length n, its contents unspecified; Put takes back a buffer Get
// returned, which its caller no longer uses. Both are called
// concurrently.
type BufferPool interface {
	Get(n int) *[]byte
	Put(b *[]byte)
}

// Server serves NBD exports. It is safe for concurrent use.
type Server struct {
	tlsConfig        *tls.Config
	requireTLS       bool
	defaultExport    string
	maxInFlight      int
	maxInFlightBytes int64
	maxReplyBytes    int64
	maxConns         int64 // 0: no bound
	handshakeTimeout time.Duration
	log              *slog.Logger
	serviceTimes     *ServiceTimes
	observer         Observer
	buffers          BufferPool

	// shutdownCtx is cancelled by Shutdown, closeCtx by Close; sessions
	// hang their reactions on them with context.AfterFunc.
	shutdownCtx context.Context
	shutdown    context.CancelFunc
	closeCtx    context.Context
	close       context.CancelFunc

	transmitting atomic.Int64 // connections in the transmission phase
	conns        atomic.Int64 // connections open from Serve

	mu        sync.Mutex
	exports   map[string]*exportState
	listeners map[net.Listener]struct{}
	closed    bool
	wg        sync.WaitGroup // every goroutine the server started
}

// NewServer checks cfg and returns a Server.
func NewServer(cfg Config) (*Server, error) {
	if cfg.RequireTLS && cfg.TLSConfig == nil {
		return nil, errors.New("nbd: RequireTLS without a TLSConfig")
	}
	if cfg.TLSConfig != nil && cfg.TLSConfig.ClientAuth != tls.NoClientCert && !cfg.RequireTLS {
		return nil, errors.New("nbd: TLSConfig asks clients for certificates but RequireTLS is off: a client that does not start TLS would skip the check")
	}
	s := &Server{
		tlsConfig:        cfg.TLSConfig,
		requireTLS:       cfg.RequireTLS,
		defaultExport:    cfg.DefaultExport,
		maxInFlight:      cfg.MaxInFlight,
		maxInFlightBytes: cfg.MaxInFlightBytes,
		maxReplyBytes:    cfg.MaxReplyBytes,
		maxConns:         int64(cfg.MaxConns),
		handshakeTimeout: cfg.HandshakeTimeout,
		log:              cfg.Logger,
		serviceTimes:     cfg.ServiceTimes,
		observer:         cfg.Observer,
		buffers:          cfg.Buffers,
		exports:          make(map[string]*exportState),
		listeners:        make(map[net.Listener]struct{}),
	}
	if s.buffers == nil {
		s.buffers = new(bufpool.Pool)
	}
	if s.maxInFlight <= 0 {
		s.maxInFlight = 128
	}
	if s.maxInFlightBytes <= 0 {
		s.maxInFlightBytes = 128 << 20
	}
	s.maxInFlightBytes = max(s.maxInFlightBytes, DefaultMaxPayload)
	if s.maxReplyBytes <= 0 {
		s.maxReplyBytes = DefaultMaxReplyBytes
	}
	switch {
	case s.maxConns == 0:
		s.maxConns = DefaultMaxConns
	case s.maxConns < 0:
		s.maxConns = 0
	}
	if s.handshakeTimeout <= 0 {
		s.handshakeTimeout = DefaultHandshakeTimeout
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.shutdownCtx, s.shutdown = context.WithCancel(context.Background())
	s.closeCtx, s.close = context.WithCancel(context.Background())
	for _, e := range cfg.Exports {
		if err := s.AddExport(e); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// AddExport offers e to new connections. Names must be unique.
func (s *Server) AddExport(e *Export) error {
	st, err := newExportState(e)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, dup := s.exports[e.Name]; dup {
		return fmt.Errorf("nbd: export %q already exists", e.Name)
	}
	s.exports[e.Name] = st
	return nil
}

// RemoveExport stops offering the named export to new connections;
// connections already using it go on.
func (s *Server) RemoveExport(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.exports, name)
}

// lookup finds the export a client asked for.
func (s *Server) lookup(name string) *exportState {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.exports[name]; ok {
		return e
	}
	if name == "" && s.defaultExport != "" {
		return s.exports[s.defaultExport]
	}
	return nil
}

// exportList returns the exports sorted by name.
func (s *Server) exportList() []*exportState {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := make([]*exportState, 0, len(s.exports))
	for _, e := range s.exports {
		l = append(l, e)
	}
	sort.Slice(l, func(i, j int) bool { return l[i].Name < l[j].Name })
	return l
}

// Serve accepts connections on l and serves each in its own goroutine,
// starting with the handshake. It returns ErrServerClosed after Shutdown
// or Close, ctx.Err() when ctx ends (which also aborts the connections it
// accepted), or the error that stopped Accept. l is closed on return.
func (s *Server) Serve(ctx context.Context, l net.Listener) error {
	if !s.track(l) {
		l.Close()
		return ErrServerClosed
	}
	defer s.untrack(l)
	stop := context.AfterFunc(ctx, func() { l.Close() })
	defer stop()
	var delay time.Duration
	var limited connLimitLog
	for {
		c, err := l.Accept()
		if err != nil {
			if s.isClosing() {
				return ErrServerClosed
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				delay = min(max(2*delay, 5*time.Millisecond), time.Second)
				s.log.Warn("nbd: accept failed, retrying", "err", err, "delay", delay)
				select {
				case <-time.After(delay):
					continue
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			return fmt.Errorf("nbd: accept: %w", err)
		}
		delay = 0
		if !s.admit() {
			limited.refused(s, c.RemoteAddr())
			c.Close()
			continue
		}
		if !s.addGoroutine() {
			s.conns.Add(-1)
			c.Close()
			return ErrServerClosed
		}
		go func() {
			defer s.wg.Done()
			defer s.conns.Add(-1)
			if err := s.ServeConn(ctx, c); err != nil && !errors.Is(err, ErrServerClosed) {
				s.log.Info("nbd: connection ended", "remote", c.RemoteAddr(), "err", err)
			}
		}()
	}
}

// admit counts one more connection from Serve, unless that would pass
// the bound.
func (s *Server) admit() bool {
	if n := s.conns.Add(1); s.maxConns > 0 && n > s.maxConns {
		s.conns.Add(-1)
		return false
	}
	return true
}

// connLimitLog logs the connections Serve refuses at the bound, at most
// once a second, so that a flood of them does not flood the log.
type connLimitLog struct {
	last  time.Time
	count int // refused since the last line
}

func (cl *connLimitLog) refused(s *Server, remote net.Addr) {
	cl.count++
	if now := time.Now(); now.Sub(cl.last) >= time.Second {
		s.log.Warn("nbd: connection limit reached, closing new connections",
			"limit", s.maxConns, "refused", cl.count, "remote", remote.String())
		cl.last, cl.count = now, 0
	}
}

// ServeConn serves one connection from the handshake to the end of the
// transmission phase, and closes it. It returns nil when the client
// disconnected cleanly (NBD_CMD_DISC, NBD_OPT_ABORT) or the server shut
// down in order, and the reason otherwise. Cancelling ctx aborts the
// connection.
func (s *Server) ServeConn(ctx context.Context, c net.Conn) error {
	ss, err := s.newSession(ctx, c)
	if err != nil {
		return err
	}
	defer ss.finish()
	exp, err := ss.handshake()
	if err != nil || exp == nil {
		return ss.result(err)
	}
	return ss.result(ss.transmit(exp, false))
}

// ServeTransmission serves a connection that is already in the
// transmission phase, such as a socket handed to the Linux kernel after
// the handshake: simple replies only, no metadata contexts. On Shutdown it
// hands the connection over: it goes on reading and answering until
// nothing is in flight and nothing is waiting to be read, then shuts its
// read side (c must have CloseRead, as Unix sockets do; otherwise it
// closes), answers whatever the client had already sent and closes. A
// send after that fails on the client's side, so the kernel requeues the
// request for its next connection (after a reconfigure) at once instead
// of waiting for its request timeout. It closes c on return.
func (s *Server) ServeTransmission(ctx context.Context, c net.Conn, e *Export) error {
	st, err := newExportState(e)
	if err != nil {
		c.Close()
		return err
	}
	ss, err := s.newSession(ctx, c)
	if err != nil {
		return err
	}
	defer ss.finish()
	return ss.result(ss.transmit(st, true))
}

// Transmitting reports how many connections are in the transmission
// phase: past the handshake, serving requests (kernel connections
// included). A serving process sizes its scheduler by it (package
// internal/maxprocs).
func (s *Server) Transmitting() int { return int(s.transmitting.Load()) }

// Shutdown stops accepting connections and ends the open ones in order:
// connections in the handshake get NBD_REP_ERR_SHUTDOWN and a second to
// leave; in the transmission phase the requests in flight are completed
// and answered, later ones get NBD_ESHUTDOWN (kernel connections are
// served until they are idle instead: see ServeTransmission), then the
// connection is closed. If ctx ends first, Shutdown calls Close and
// returns ctx.Err(); a kernel connection that never goes idle (a steady
// stream of requests) ends that way.
func (s *Server) Shutdown(ctx context.Context) error {
	s.beginClosing()
	s.shutdown()
	done := make(chan struct{})
	go func() {
		s.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		s.close()
		return nil
	case <-ctx.Done():
		s.Close()
		return ctx.Err()
	}
}

// Close aborts every connection and listener and returns when every
// goroutine the server started has ended. Requests in flight get no reply.
func (s *Server) Close() error {
	s.beginClosing()
	s.shutdown()
	s.close()
	s.wg.Wait()
	return nil
}

func (s *Server) beginClosing() {
	s.mu.Lock()
	s.closed = true
	ls := make([]net.Listener, 0, len(s.listeners))
	for l := range s.listeners {
		ls = append(ls, l)
	}
	s.mu.Unlock()
	for _, l := range ls {
		l.Close()
	}
}

func (s *Server) isClosing() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// addGoroutine counts one more goroutine for Close to wait for, unless the
// server is closing.
func (s *Server) addGoroutine() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.wg.Add(1)
	return true
}

func (s *Server) track(l net.Listener) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.listeners[l] = struct{}{}
	return true
}

func (s *Server) untrack(l net.Listener) {
	s.mu.Lock()
	delete(s.listeners, l)
	s.mu.Unlock()
	l.Close()
}
