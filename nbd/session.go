package nbd

import (
	"bufio"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"sync"
	"time"

	"github.com/purerbd/purerbd/internal/rawsock"
)

// session is one client connection, through the handshake and the
// transmission phase.
type session struct {
	srv    *Server
	ctx    context.Context // cancelled when the connection is aborted
	cancel context.CancelFunc
	log    *slog.Logger
	stops  []func() bool

	mu           sync.Mutex
	conn         net.Conn // the current connection: TLS once started
	inTransmit   bool
	shuttingDown bool
	onShutdown   func() // the transmission's reaction to Shutdown

	br *bufio.Reader
	bw *connWriter
	rd *connReader // what br reads from

	// Negotiated during the handshake.
	fixedNewstyle bool
	noZeroes      bool
	tlsUp         bool
	structured    bool
	metaExport    string        // export named by the last SET_META_CONTEXT
	metaContexts  []metaContext // what that selected
}

func (s *Server) newSession(ctx context.Context, c net.Conn) (*session, error) {
	if !s.addGoroutine() {
		c.Close()
		return nil, ErrServerClosed
	}
	ctx, cancel := context.WithCancel(ctx)
	ss := &session{
		srv:    s,
		ctx:    ctx,
		cancel: cancel,
		log:    s.log.With("remote", c.RemoteAddr().String()),
		conn:   c,
	}
	ss.setBuffers(c)
	ss.stops = append(ss.stops,
		context.AfterFunc(ctx, func() { ss.currentConn().Close() }),
		context.AfterFunc(s.closeCtx, cancel),
		context.AfterFunc(s.shutdownCtx, ss.beginShutdown),
	)
	return ss, nil
}

// finish releases the session; the connection is closed.
func (ss *session) finish() {
	for _, stop := range ss.stops {
		stop()
	}
	ss.cancel()
	ss.currentConn().Close()
	ss.srv.wg.Done()
}

func (ss *session) currentConn() net.Conn {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return ss.conn
}

func (ss *session) setConn(c net.Conn) {
	ss.mu.Lock()
	ss.conn = c
	ss.mu.Unlock()
	ss.setBuffers(c)
}

// setBuffers puts fresh buffers on c, read and written with raw system
// calls when c is a socket that allows them (package rawsock); the
// transmission phase turns polling reads on where its export pays for
// them (connReader.setPoll).
func (ss *session) setBuffers(c net.Conn) {
	var r io.Reader = c
	var w io.Writer = c
	var raw *rawsock.Writer
	var rr *rawsock.Reader
	if uc, ok := c.(*net.UnixConn); ok {
		// A hint: the kernel caps it at net.core.wmem_max.
		_ = uc.SetWriteBuffer(unixSendBuffer)
	}
	if rc := rawsock.Of(c); rc != nil {
		raw, rr = rawsock.NewWriter(rc), rawsock.NewReader(rc, false)
		r, w = rr, raw
	}
	ss.rd = &connReader{r: r, raw: rr}
	ss.br = bufio.NewReaderSize(ss.rd, 64<<10)
	ss.bw = newConnWriter(w, raw)
}

// unixSendBuffer is the send buffer asked for on Unix sockets. Their
// default (net.core.wmem_default, 208 KiB) is smaller than one 256 KiB READ
// reply (nbdcopy's request size), so each such reply took three to four
// writes, each but the last waiting for the client to drain the socket:
// under nbdcopy 2.2 poller waits and 1.5 context switches per reply. With
// 4 MiB, where the system allows it, that was 1.06 writes, 0.53 waits and
// 0.3 switches per reply. The memory is used only while the client has
// not read its replies. TCP is left to the kernel's autotuning.
const unixSendBuffer = 4 << 20

// connReader is what a session's bufio.Reader reads from: the connection,
// with a hook that runs whenever the buffer ran dry and the next read may
// block, so that replies held back for batching go out first.
type connReader struct {
	r           io.Reader       // the connection
	raw         *rawsock.Reader // r when it is one, else nil
	beforeBlock func()          // set by the goroutine that reads; may be nil
}

// setPoll turns polling reads on or off (rawsock.Reader.SetPoll) where
// the connection is read with raw system calls; only the reading
// goroutine calls it.
func (r *connReader) setPoll(poll bool) {
	if r.raw != nil {
		r.raw.SetPoll(poll)
	}
}

func (r *connReader) Read(p []byte) (int, error) {
	if r.beforeBlock != nil {
		r.beforeBlock()
	}
	return r.r.Read(p)
}

func (ss *session) isShuttingDown() bool {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return ss.shuttingDown
}

// beginShutdown runs when the server starts an orderly shutdown.
func (ss *session) beginShutdown() {
	ss.mu.Lock()
	ss.shuttingDown = true
	inTransmit, fn, c := ss.inTransmit, ss.onShutdown, ss.conn
	ss.mu.Unlock()
	if !inTransmit {
		// Options that arrive within the grace period are refused with
		// NBD_REP_ERR_SHUTDOWN; an idle client is dropped after it.
		c.SetDeadline(time.Now().Add(time.Second))
		return
	}
	if fn != nil {
		fn()
	}
}

// enterTransmission switches the session to the transmission phase and
// installs its shutdown reaction; it runs fn at once if a shutdown already
// began.
func (ss *session) enterTransmission(fn func()) {
	ss.mu.Lock()
	ss.inTransmit = true
	ss.onShutdown = fn
	sd := ss.shuttingDown
	ss.mu.Unlock()
	if sd {
		fn()
	}
}

// result turns the reason a session ended into what ServeConn returns:
// nil for the ends the protocol calls clean.
func (ss *session) result(err error) error {
	switch {
	case err == nil:
		return nil
	case ss.srv.closeCtx.Err() != nil:
		return ErrServerClosed
	case ss.ctx.Err() != nil:
		return ss.ctx.Err()
	case errors.Is(err, errCleanEnd):
		return nil
	case ss.isShuttingDown() && (errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed)):
		return nil
	}
	return err
}

// errCleanEnd marks the ends of a session that are no error: the client
// closed the connection between two messages.
var errCleanEnd = errors.New("nbd: peer closed the connection")
