package nbdtest

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// Options choose what a Client negotiates.
type Options struct {
	// Export is the export name.
	Export string
	// Structured negotiates structured replies.
	Structured bool
	// BlockStatus selects base:allocation (and implies Structured).
	BlockStatus bool
	// TLS, if set, starts TLS before any other option.
	TLS *tls.Config
	// ExportName ends the handshake with NBD_OPT_EXPORT_NAME instead of
	// NBD_OPT_GO; NoZeroes then asks the server to omit the 124 zeroes.
	ExportName bool
	NoZeroes   bool
}

// Client is a small NBD client for tests and benchmarks. Its methods may
// be called from many goroutines; requests are pipelined.
type Client struct {
	conn net.Conn

	// What the handshake learnt.
	Size       int64
	Flags      uint16
	Structured bool
	// MetaContextID is the id of base:allocation, valid when HasMeta.
	MetaContextID              uint32
	HasMeta                    bool
	MinBlock, PrefBlock, MaxPL uint32

	wmu sync.Mutex
	bw  *bufio.Writer

	mu      sync.Mutex
	pending map[uint64]*call
	cookie  uint64
	err     error
	done    chan struct{}
}

// ReplyError is an error the server sent for a request.
type ReplyError struct {
	Errno   uint32
	Message string
}

func (e *ReplyError) Error() string {
	if e.Message != "" {
		return fmt.Sprintf("nbd server error %d: %s", e.Errno, e.Message)
	}
	return fmt.Sprintf("nbd server error %d", e.Errno)
}

// Extent is one block status descriptor.
type Extent struct {
	Length uint32
	Flags  uint32
}

// Reply is what came back for one request.
type Reply struct {
	Err     *ReplyError
	Extents []Extent // NBD_CMD_BLOCK_STATUS
	Chunks  int      // structured chunks received
	Holes   int      // NBD_REPLY_TYPE_OFFSET_HOLE chunks among them
	Simple  bool     // the reply was a simple reply
}

type call struct {
	typ     uint16
	off     uint64
	length  uint32
	buf     []byte // READ destination
	covered uint64 // READ bytes covered by content chunks
	reply   Reply
	done    chan struct{}
}

// Dial connects to a Unix socket path ("unix") or TCP address ("tcp") and
// negotiates.
func Dial(ctx context.Context, network, addr string, o Options) (*Client, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, fmt.Errorf("nbdtest: dial: %w", err)
	}
	c, err := Handshake(conn, o)
	if err != nil {
		conn.Close()
		return nil, err
	}
	return c, nil
}

// OptReply is one reply to an option.
type OptReply struct {
	Option uint32
	Type   uint32
	Data   []byte
}

// ReadOptReply reads one option reply (data up to 64 KiB).
func ReadOptReply(r io.Reader) (OptReply, error) {
	var h [20]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return OptReply{}, fmt.Errorf("nbdtest: read option reply: %w", err)
	}
	if m := binary.BigEndian.Uint64(h[:]); m != MagicOptReply {
		return OptReply{}, fmt.Errorf("nbdtest: option reply magic %#x", m)
	}
	rep := OptReply{Option: binary.BigEndian.Uint32(h[8:]), Type: binary.BigEndian.Uint32(h[12:])}
	n := binary.BigEndian.Uint32(h[16:])
	if n > 64<<10 {
		return rep, fmt.Errorf("nbdtest: option reply of %d bytes", n)
	}
	rep.Data = make([]byte, n)
	if _, err := io.ReadFull(r, rep.Data); err != nil {
		return rep, fmt.Errorf("nbdtest: read option reply data: %w", err)
	}
	return rep, nil
}

// ReadGreeting reads the server's greeting and returns its handshake flags.
func ReadGreeting(r io.Reader) (uint16, error) {
	var g [18]byte
	if _, err := io.ReadFull(r, g[:]); err != nil {
		return 0, fmt.Errorf("nbdtest: read greeting: %w", err)
	}
	if binary.BigEndian.Uint64(g[0:]) != MagicNBD || binary.BigEndian.Uint64(g[8:]) != MagicIHaveOpt {
		return 0, fmt.Errorf("nbdtest: bad greeting % x", g)
	}
	return binary.BigEndian.Uint16(g[16:]), nil
}

// Handshake negotiates over conn and starts the reply reader.
func Handshake(conn net.Conn, o Options) (*Client, error) {
	br := bufio.NewReader(conn)
	hflags, err := ReadGreeting(br)
	if err != nil {
		return nil, err
	}
	cflags := uint32(FlagFixedNewstyle)
	if o.NoZeroes && hflags&FlagNoZeroes != 0 {
		cflags |= FlagNoZeroes
	}
	if err := binary.Write(conn, binary.BigEndian, cflags); err != nil {
		return nil, fmt.Errorf("nbdtest: send client flags: %w", err)
	}
	exchange := func(opt uint32, data []byte) ([]OptReply, error) {
		if _, err := conn.Write(Option(opt, data)); err != nil {
			return nil, fmt.Errorf("nbdtest: send option %d: %w", opt, err)
		}
		var out []OptReply
		for {
			rep, err := ReadOptReply(br)
			if err != nil {
				return out, err
			}
			out = append(out, rep)
			if rep.Type == RepAck || rep.Type&(1<<31) != 0 {
				if rep.Type != RepAck {
					return out, fmt.Errorf("nbdtest: option %d refused with %#x: %s", opt, rep.Type, rep.Data)
				}
				return out, nil
			}
		}
	}
	if o.TLS != nil {
		if _, err := exchange(OptStartTLS, nil); err != nil {
			return nil, err
		}
		tc := tls.Client(conn, o.TLS)
		if err := tc.Handshake(); err != nil {
			return nil, fmt.Errorf("nbdtest: TLS handshake: %w", err)
		}
		conn = tc
		br = bufio.NewReader(conn)
	}
	c := &Client{conn: conn, pending: make(map[uint64]*call), done: make(chan struct{})}
	if o.Structured || o.BlockStatus {
		if _, err := exchange(OptStructuredReply, nil); err != nil {
			return nil, err
		}
		c.Structured = true
	}
	if o.BlockStatus {
		reps, err := exchange(OptSetMetaContext, MetaContextData(o.Export, "base:allocation"))
		if err != nil {
			return nil, err
		}
		for _, r := range reps {
			if r.Type == RepMetaContext && len(r.Data) >= 4 && string(r.Data[4:]) == "base:allocation" {
				c.MetaContextID, c.HasMeta = binary.BigEndian.Uint32(r.Data), true
			}
		}
		if !c.HasMeta {
			return nil, errors.New("nbdtest: server did not select base:allocation")
		}
	}
	if o.ExportName {
		if _, err := conn.Write(Option(OptExportName, []byte(o.Export))); err != nil {
			return nil, fmt.Errorf("nbdtest: send export name: %w", err)
		}
		n := 10 + 124
		if cflags&FlagNoZeroes != 0 {
			n = 10
		}
		b := make([]byte, n)
		if _, err := io.ReadFull(br, b); err != nil {
			return nil, fmt.Errorf("nbdtest: read export info: %w", err)
		}
		c.Size, c.Flags = int64(binary.BigEndian.Uint64(b)), binary.BigEndian.Uint16(b[8:])
	} else {
		reps, err := exchange(OptGo, InfoData(o.Export, InfoBlockSize))
		if err != nil {
			return nil, err
		}
		for _, r := range reps {
			if r.Type != RepInfo || len(r.Data) < 2 {
				continue
			}
			switch binary.BigEndian.Uint16(r.Data) {
			case InfoExport:
				if len(r.Data) == 12 {
					c.Size, c.Flags = int64(binary.BigEndian.Uint64(r.Data[2:])), binary.BigEndian.Uint16(r.Data[10:])
				}
			case InfoBlockSize:
				if len(r.Data) == 14 {
					c.MinBlock = binary.BigEndian.Uint32(r.Data[2:])
					c.PrefBlock = binary.BigEndian.Uint32(r.Data[6:])
					c.MaxPL = binary.BigEndian.Uint32(r.Data[10:])
				}
			}
		}
	}
	c.bw = bufio.NewWriterSize(conn, 256<<10)
	go c.readLoop(br)
	return c, nil
}

// NewTransmission starts a client on a connection already in the
// transmission phase (as the kernel is given), with simple replies.
func NewTransmission(conn net.Conn) *Client {
	c := &Client{conn: conn, pending: make(map[uint64]*call), done: make(chan struct{}), bw: bufio.NewWriterSize(conn, 256<<10)}
	go c.readLoop(bufio.NewReader(conn))
	return c
}

// Conn is the underlying connection.
func (c *Client) Conn() net.Conn { return c.conn }

// Err is the error that stopped the reply reader, once it stopped.
func (c *Client) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Done is closed when the reply reader stopped.
func (c *Client) Done() <-chan struct{} { return c.done }

// Cmd is one request.
type Cmd struct {
	Type   uint16
	Flags  uint16
	Offset uint64
	Length uint32 // for WRITE, defaults to len(Data)
	Data   []byte // WRITE payload
	Buf    []byte // READ destination (len >= Length)
}

// Do sends one request and waits for its reply. A server error is
// returned both in Reply.Err and as the error.
func (c *Client) Do(ctx context.Context, cmd Cmd) (Reply, error) {
	if cmd.Type == CmdWrite && cmd.Length == 0 {
		cmd.Length = uint32(len(cmd.Data))
	}
	cl := &call{typ: cmd.Type, off: cmd.Offset, length: cmd.Length, buf: cmd.Buf, done: make(chan struct{})}
	if cmd.Type == CmdRead && len(cl.buf) < int(cmd.Length) {
		return Reply{}, errors.New("nbdtest: read buffer shorter than the length")
	}
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		return Reply{}, err
	}
	c.cookie++
	cookie := c.cookie
	c.pending[cookie] = cl
	c.mu.Unlock()

	c.wmu.Lock()
	_, err := c.bw.Write(Request(cmd.Flags, cmd.Type, cookie, cmd.Offset, cmd.Length, nil))
	if err == nil && cmd.Type == CmdWrite {
		_, err = c.bw.Write(cmd.Data)
	}
	if err == nil {
		err = c.bw.Flush()
	}
	c.wmu.Unlock()
	if err != nil {
		c.fail(fmt.Errorf("nbdtest: send request: %w", err))
	}
	select {
	case <-cl.done:
	case <-c.done:
		select {
		case <-cl.done:
		default:
			return Reply{}, c.Err()
		}
	case <-ctx.Done():
		return Reply{}, ctx.Err()
	}
	if cl.reply.Err != nil {
		return cl.reply, cl.reply.Err
	}
	return cl.reply, nil
}

// ReadAt reads len(p) bytes at off.
func (c *Client) ReadAt(ctx context.Context, p []byte, off int64) error {
	_, err := c.Do(ctx, Cmd{Type: CmdRead, Offset: uint64(off), Length: uint32(len(p)), Buf: p})
	return err
}

// WriteAt writes p at off with the given command flags.
func (c *Client) WriteAt(ctx context.Context, p []byte, off int64, flags uint16) error {
	_, err := c.Do(ctx, Cmd{Type: CmdWrite, Flags: flags, Offset: uint64(off), Data: p})
	return err
}

// Flush sends NBD_CMD_FLUSH.
func (c *Client) Flush(ctx context.Context) error {
	_, err := c.Do(ctx, Cmd{Type: CmdFlush})
	return err
}

// BlockStatus queries base:allocation.
func (c *Client) BlockStatus(ctx context.Context, off int64, length uint32, flags uint16) ([]Extent, error) {
	r, err := c.Do(ctx, Cmd{Type: CmdBlockStatus, Flags: flags, Offset: uint64(off), Length: length})
	return r.Extents, err
}

// Close sends NBD_CMD_DISC, waits for the server to close the connection
// and closes it.
func (c *Client) Close() error {
	c.wmu.Lock()
	_, err := c.bw.Write(Request(0, CmdDisc, 0, 0, 0, nil))
	if err == nil {
		err = c.bw.Flush()
	}
	c.wmu.Unlock()
	if err == nil {
		select {
		case <-c.done:
		case <-time.After(10 * time.Second):
			err = errors.New("nbdtest: server did not close the connection after NBD_CMD_DISC")
		}
	}
	c.conn.Close()
	<-c.done
	if rerr := c.Err(); err == nil && rerr != nil && !errors.Is(rerr, io.EOF) {
		err = rerr
	}
	return err
}

func (c *Client) fail(err error) {
	c.mu.Lock()
	if c.err == nil {
		c.err = err
	}
	c.mu.Unlock()
	c.conn.Close()
}

func (c *Client) readLoop(br *bufio.Reader) {
	defer close(c.done)
	for {
		if err := c.readReply(br); err != nil {
			c.fail(err)
			c.mu.Lock()
			c.pending = nil
			c.mu.Unlock()
			return
		}
	}
}

func (c *Client) lookup(cookie uint64) *call {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.pending[cookie]
}

func (c *Client) complete(cookie uint64, cl *call) {
	c.mu.Lock()
	delete(c.pending, cookie)
	c.mu.Unlock()
	close(cl.done)
}

// readAnnounced reads the n bytes a chunk header announces into memory
// that grows as they arrive, so a header announcing megabytes that do not
// follow costs nothing.
func readAnnounced(r io.Reader, n uint32) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, int64(n)))
	if err == nil && len(b) < int(n) {
		err = io.ErrUnexpectedEOF
	}
	return b, err
}

// readReply reads one simple reply or one structured chunk.
func (c *Client) readReply(br *bufio.Reader) error {
	var m [4]byte
	if _, err := io.ReadFull(br, m[:]); err != nil {
		return err
	}
	switch binary.BigEndian.Uint32(m[:]) {
	case MagicSimple:
		var h [12]byte
		if _, err := io.ReadFull(br, h[:]); err != nil {
			return fmt.Errorf("nbdtest: read simple reply: %w", err)
		}
		errno, cookie := binary.BigEndian.Uint32(h[:]), binary.BigEndian.Uint64(h[4:])
		cl := c.lookup(cookie)
		if cl == nil {
			return fmt.Errorf("nbdtest: simple reply for unknown cookie %d", cookie)
		}
		cl.reply.Simple = true
		if errno != 0 {
			cl.reply.Err = &ReplyError{Errno: errno}
		} else if cl.typ == CmdRead {
			if c.Structured {
				return errors.New("nbdtest: simple reply to a READ after structured replies were negotiated")
			}
			if _, err := io.ReadFull(br, cl.buf[:cl.length]); err != nil {
				return fmt.Errorf("nbdtest: read data: %w", err)
			}
		}
		c.complete(cookie, cl)
		return nil
	case MagicStructured:
		return c.readChunk(br)
	}
	return fmt.Errorf("nbdtest: reply magic %#x", m)
}

func (c *Client) readChunk(br *bufio.Reader) error {
	if !c.Structured {
		return errors.New("nbdtest: structured chunk without negotiation")
	}
	var h [16]byte
	if _, err := io.ReadFull(br, h[:]); err != nil {
		return fmt.Errorf("nbdtest: read chunk: %w", err)
	}
	flags, typ := binary.BigEndian.Uint16(h[0:]), binary.BigEndian.Uint16(h[2:])
	cookie, length := binary.BigEndian.Uint64(h[4:]), binary.BigEndian.Uint32(h[12:])
	cl := c.lookup(cookie)
	if cl == nil {
		return fmt.Errorf("nbdtest: chunk for unknown cookie %d", cookie)
	}
	cl.reply.Chunks++
	switch typ {
	case ReplyTypeNone:
		if length != 0 || flags&ReplyFlagDone == 0 {
			return errors.New("nbdtest: bad NBD_REPLY_TYPE_NONE chunk")
		}
	case ReplyTypeOffsetData, ReplyTypeOffsetHole:
		if cl.typ != CmdRead {
			return fmt.Errorf("nbdtest: content chunk for command %d", cl.typ)
		}
		var o [8]byte
		if length < 9 || (typ == ReplyTypeOffsetHole && length != 12) {
			return fmt.Errorf("nbdtest: content chunk of length %d", length)
		}
		if _, err := io.ReadFull(br, o[:]); err != nil {
			return fmt.Errorf("nbdtest: read chunk: %w", err)
		}
		off := binary.BigEndian.Uint64(o[:])
		n := uint64(length - 8)
		if typ == ReplyTypeOffsetHole {
			var s [4]byte
			if _, err := io.ReadFull(br, s[:]); err != nil {
				return fmt.Errorf("nbdtest: read chunk: %w", err)
			}
			n = uint64(binary.BigEndian.Uint32(s[:]))
		}
		if n == 0 || off < cl.off || off-cl.off > uint64(cl.length) || n > uint64(cl.length)-(off-cl.off) {
			return fmt.Errorf("nbdtest: content chunk %d+%d outside request %d+%d", off, n, cl.off, cl.length)
		}
		dst := cl.buf[off-cl.off : off-cl.off+n]
		if typ == ReplyTypeOffsetData {
			if _, err := io.ReadFull(br, dst); err != nil {
				return fmt.Errorf("nbdtest: read chunk data: %w", err)
			}
		} else {
			clear(dst)
			cl.reply.Holes++
		}
		cl.covered += n
	case ReplyTypeBlockStatus:
		if cl.typ != CmdBlockStatus || length < 12 || (length-4)%8 != 0 || length > 4+8<<20 {
			return fmt.Errorf("nbdtest: block status chunk of length %d", length)
		}
		b, err := readAnnounced(br, length)
		if err != nil {
			return fmt.Errorf("nbdtest: read chunk: %w", err)
		}
		if id := binary.BigEndian.Uint32(b); !c.HasMeta || id != c.MetaContextID {
			return fmt.Errorf("nbdtest: block status for context %d", id)
		}
		for i := 4; i < len(b); i += 8 {
			cl.reply.Extents = append(cl.reply.Extents, Extent{Length: binary.BigEndian.Uint32(b[i:]), Flags: binary.BigEndian.Uint32(b[i+4:])})
		}
	default:
		if typ&(1<<15) == 0 {
			return fmt.Errorf("nbdtest: unknown chunk type %d", typ)
		}
		if length < 6 || length > 6+4096+8 {
			return fmt.Errorf("nbdtest: error chunk of length %d", length)
		}
		b, err := readAnnounced(br, length)
		if err != nil {
			return fmt.Errorf("nbdtest: read chunk: %w", err)
		}
		msgLen := uint32(binary.BigEndian.Uint16(b[4:]))
		if msgLen > length-6 {
			return fmt.Errorf("nbdtest: error message of %d bytes in a chunk of %d", msgLen, length)
		}
		errno := binary.BigEndian.Uint32(b)
		if errno == 0 {
			return errors.New("nbdtest: error chunk with error 0")
		}
		if cl.reply.Err == nil {
			cl.reply.Err = &ReplyError{Errno: errno, Message: string(b[6 : 6+msgLen])}
		}
	}
	if flags&ReplyFlagDone != 0 {
		if cl.typ == CmdRead && cl.reply.Err == nil && cl.covered != uint64(cl.length) {
			return fmt.Errorf("nbdtest: read of %d bytes answered with %d", cl.length, cl.covered)
		}
		c.complete(cookie, cl)
	}
	return nil
}
