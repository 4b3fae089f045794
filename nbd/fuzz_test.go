package nbd_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math/bits"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/purerbd/purerbd/internal/alloctest"
	"github.com/purerbd/purerbd/nbd"
	"github.com/purerbd/purerbd/nbd/nbdtest"
)

// memConn is a net.Conn whose peer is a fixed input: reads consume it and
// then see io.EOF, writes are collected. It makes a server's output a pure
// function of its input, which the fuzz oracles check byte by byte.
type memConn struct {
	mu     sync.Mutex
	in     *bytes.Reader
	out    bytes.Buffer
	closed bool
}

type memAddr struct{}

func (memAddr) Network() string { return "mem" }
func (memAddr) String() string  { return "mem" }

func (c *memConn) Read(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return 0, net.ErrClosed
	}
	return c.in.Read(p)
}

func (c *memConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return 0, net.ErrClosed
	}
	return c.out.Write(p)
}

func (c *memConn) Close() error {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	return nil
}

func (c *memConn) output() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return bytes.Clone(c.out.Bytes())
}

func (*memConn) LocalAddr() net.Addr              { return memAddr{} }
func (*memConn) RemoteAddr() net.Addr             { return memAddr{} }
func (*memConn) SetDeadline(time.Time) error      { return nil }
func (*memConn) SetReadDeadline(time.Time) error  { return nil }
func (*memConn) SetWriteDeadline(time.Time) error { return nil }

const fuzzExportSize = 1 << 20

func fuzzServer(t *testing.T) *nbd.Server {
	t.Helper()
	a, _ := nbd.NewMemory(fuzzExportSize)
	b, _ := nbd.NewMemory(4096)
	// "d" offers a dirty bitmap, so that block status answers two
	// contexts ("e" stays a bare Memory, served by the inline path)
	m, _ := nbd.NewMemory(fuzzExportSize)
	d := bitmapDisk{Memory: m, bitmaps: map[string][][2]int64{"b1": {{4096, 8192}, {fuzzExportSize / 2, 512}}}}
	srv, err := nbd.NewServer(nbd.Config{
		Exports:     []*nbd.Export{{Name: "e", Description: "fuzz", Backend: a}, {Name: "", Backend: b}, {Name: "d", Backend: d}},
		MaxInFlight: 8,
	})
	if err != nil {
		t.Fatal(err)
	}
	return srv
}

// serveWithin runs serve and fails the test if it does not return in time.
func serveWithin(t *testing.T, what string, serve func() error) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- serve() }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s did not return: the server hangs", what)
	}
}

// overPipe feeds input to serve over a net.Pipe, with deadlines, and
// checks that the server ends; the output is only drained.
func overPipe(t *testing.T, input []byte, serve func(net.Conn) error) {
	t.Helper()
	client, server := net.Pipe()
	client.SetDeadline(time.Now().Add(5 * time.Second))
	go io.Copy(io.Discard, client)
	go func() {
		client.Write(input)
		client.Close()
	}()
	serveWithin(t, "serve over net.Pipe", func() error { return serve(server) })
	client.Close()
}

// FuzzHandshakeOptions sends fuzzed client flags and options. Every
// well-formed option before the end of the handshake must be answered, in
// order, by option replies naming it and ending with one final reply.
func FuzzHandshakeOptions(f *testing.F) {
	for _, s := range handshakeSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, input []byte) {
		srv := fuzzServer(t)
		defer srv.Close()
		var c *memConn
		alloctest.CheckAllowing(t, len(input), connBuffers, func() {
			c = &memConn{in: bytes.NewReader(input)}
			serveWithin(t, "ServeConn", func() error { return srv.ServeConn(context.Background(), c) })
		})
		if err := checkHandshake(input, c.output()); err != nil {
			t.Fatalf("%v\ninput  % x\noutput % x", err, input, c.output())
		}
		overPipe(t, input, func(conn net.Conn) error { return srv.ServeConn(context.Background(), conn) })
	})
}

// checkHandshake is the oracle of FuzzHandshakeOptions.
func checkHandshake(in, out []byte) error {
	if len(out) < 18 || binary.BigEndian.Uint64(out) != nbdtest.MagicNBD || binary.BigEndian.Uint64(out[8:]) != nbdtest.MagicIHaveOpt {
		return fmt.Errorf("no greeting")
	}
	out = out[18:]
	if len(in) < 4 {
		return expectEnd(out)
	}
	if binary.BigEndian.Uint32(in)&^3 != 0 { // unknown client flags
		return expectEnd(out)
	}
	in = in[4:]
	for len(in) >= 16 {
		if binary.BigEndian.Uint64(in) != nbdtest.MagicIHaveOpt {
			return expectEnd(out)
		}
		opt, n := binary.BigEndian.Uint32(in[8:]), binary.BigEndian.Uint32(in[12:])
		if uint64(n) > uint64(len(in)-16) {
			return nil // truncated: the server waits, then sees EOF
		}
		data := in[16 : 16+n]
		in = in[16+n:]
		if opt == nbdtest.OptExportName {
			return nil // transmission (or a hang-up) follows
		}
		for {
			if len(out) < 20 {
				return fmt.Errorf("option %d (%d bytes) got no final reply", opt, len(data))
			}
			if binary.BigEndian.Uint64(out) != nbdtest.MagicOptReply {
				return fmt.Errorf("option %d: reply magic %#x", opt, binary.BigEndian.Uint64(out))
			}
			ro, typ, rn := binary.BigEndian.Uint32(out[8:]), binary.BigEndian.Uint32(out[12:]), binary.BigEndian.Uint32(out[16:])
			if ro != opt {
				return fmt.Errorf("reply for option %d while option %d is pending: stream out of step", ro, opt)
			}
			if uint64(rn) > uint64(len(out)-20) {
				return fmt.Errorf("option %d: reply data truncated", opt)
			}
			out = out[20+rn:]
			if typ == nbdtest.RepAck || typ&(1<<31) != 0 {
				if typ == nbdtest.RepAck && (opt == nbdtest.OptGo || opt == nbdtest.OptAbort) {
					return nil
				}
				break
			}
		}
	}
	return expectEnd(out)
}

func expectEnd(out []byte) error {
	if len(out) != 0 {
		return fmt.Errorf("%d bytes sent that nothing asked for", len(out))
	}
	return nil
}

// Fuzzed transmission modes, chosen by the first input byte.
const (
	modeKernel     = 0 // ServeTransmission: simple replies
	modeSimple     = 1 // handshake without structured replies
	modeStructured = 2 // structured replies and base:allocation
	modeBitmap     = 3 // structured replies, base:allocation and a dirty bitmap (export "d")
	modeCount      = 4
	// With this bit set, every request header gets the right magic, so
	// that mutations explore fields rather than magics.
	modeFixMagic = 0x80
)

// FuzzTransmissionRequests sends fuzzed requests after a handshake (or
// none, as the kernel does). Every complete request before the end (or a
// bad magic or a DISC) must get exactly one well-formed reply.
func FuzzTransmissionRequests(f *testing.F) {
	for _, s := range transmissionSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, input []byte) {
		if len(input) == 0 {
			return
		}
		mode, reqs := input[0], bytes.Clone(input[1:])
		kind := int(mode&^modeFixMagic) % modeCount
		plan := planRequests(reqs, mode&modeFixMagic != 0)
		var prefix []byte
		switch kind {
		case modeSimple:
			prefix = handshakePrefix(false)
		case modeStructured:
			prefix = handshakePrefix(true)
		case modeBitmap:
			prefix = bitmapPrefix()
		}
		structured := kind == modeStructured || kind == modeBitmap
		contexts := 1
		if kind == modeBitmap {
			contexts = 2
		}
		srv := fuzzServer(t)
		defer srv.Close()
		wire := append(prefix, reqs...)
		serve := func(conn net.Conn) error {
			if kind == modeKernel {
				m, _ := nbd.NewMemory(fuzzExportSize)
				return srv.ServeTransmission(context.Background(), conn, &nbd.Export{Backend: m})
			}
			return srv.ServeConn(context.Background(), conn)
		}
		// The test connection's output buffer is the test's, not the
		// server's: it is made at the replies' size first, and allowed
		// for, so that its growth is not counted as the server's.
		room := replyRoom(plan)
		var c *memConn
		alloctest.CheckAllowing(t, len(wire), uint64(room)+connBuffers+exportState+declaredPayloads(reqs, contexts), func() {
			c = &memConn{in: bytes.NewReader(wire)}
			c.out.Grow(room)
			serveWithin(t, "serve", func() error { return serve(c) })
		})
		out := c.output()
		if kind != modeKernel {
			out = skipHandshake(t, out, structured)
		}
		negotiated := 0
		if structured {
			negotiated = contexts
		}
		if err := checkReplies(plan, out, structured, negotiated); err != nil {
			t.Fatalf("%v\nrequests % x\noutput   % x", err, reqs, out)
		}
		overPipe(t, append(prefix, reqs...), serve)
	})
}

// connBuffers is what a connection allocates whatever its client sends:
// the server's 64 KiB read buffer and 64 KiB reply buffer.
const connBuffers = 2 * 64 << 10

// exportState is what the fuzz export (a Memory) allocates for its own
// bookkeeping on the first write into it: storage, not decoding.
const exportState = 64 << 10

// declaredPayloads sums the buffers the READ, WRITE and BLOCK_STATUS
// requests of in call for by what they declare, complete or not (in has
// its magics fixed by planRequests): a READ's or WRITE's length rounded up
// to the buffer pool's power-of-two class (at least 4 KiB), a block
// status reply at its largest for each of its contexts. The server takes
// those before a WRITE's payload arrives and for a READ whatever its
// length; what bounds them is the connection's budget (MaxInFlight and
// the payload limit, issue 22 item 8), not the bytes received, so the
// allocation check allows them. A READ counts at least 16 KiB: a Memory
// export read inline (no pool buffer) takes its 16 KiB of zeros for
// holes. Its reply's room in the test connection's output is allowed
// apart (replyRoom).
func declaredPayloads(in []byte, contexts int) uint64 {
	var n uint64
	for len(in) >= 28 && binary.BigEndian.Uint32(in) == nbdtest.MagicRequest {
		typ, length := binary.BigEndian.Uint16(in[6:]), binary.BigEndian.Uint32(in[24:])
		in = in[28:]
		switch typ {
		case nbdtest.CmdRead:
			n += 1 << bits.Len32(max(16<<10, min(length, nbd.DefaultMaxPayload))-1)
		case nbdtest.CmdWrite:
			n += 1 << bits.Len32(max(4096, min(length, nbd.DefaultMaxPayload))-1)
		case nbdtest.CmdBlockStatus:
			n += uint64(contexts) * blockStatusReply
		}
		if typ != nbdtest.CmdWrite {
			continue
		}
		if uint64(length) > uint64(len(in)) {
			break
		}
		in = in[length:]
	}
	return n
}

// replyRoom is room for the replies to plan's requests and the
// handshake's: each READ's data, and a bound on the rest of a reply.
func replyRoom(plan []plannedRequest) int {
	n := 4 << 10
	for _, r := range plan {
		n += 1 << 10
		if r.typ == nbdtest.CmdRead {
			n += int(min(r.length, nbd.DefaultMaxPayload))
		}
	}
	return n
}

// blockStatusReply is the largest block status a request can get for
// one metadata context: 2^16 extents of 8 bytes, and the extents' list
// on the way.
const blockStatusReply = 1 << 16 * (16 + 8)

// plannedRequest is a complete request of the fuzz input.
type plannedRequest struct {
	typ    uint16
	off    uint64
	length uint32
}

// planRequests walks the input as requests, numbering their cookies
// 0, 1, 2... in place (and fixing magics if asked), and returns the
// complete ones the server must answer.
func planRequests(in []byte, fixMagic bool) []plannedRequest {
	var plan []plannedRequest
	for len(in) >= 28 {
		if fixMagic {
			binary.BigEndian.PutUint32(in, nbdtest.MagicRequest)
		}
		if binary.BigEndian.Uint32(in) != nbdtest.MagicRequest {
			break
		}
		binary.BigEndian.PutUint64(in[8:], uint64(len(plan)))
		r := plannedRequest{typ: binary.BigEndian.Uint16(in[6:]), off: binary.BigEndian.Uint64(in[16:]), length: binary.BigEndian.Uint32(in[24:])}
		if r.typ == nbdtest.CmdDisc {
			break
		}
		in = in[28:]
		if r.typ == nbdtest.CmdWrite {
			if uint64(r.length) > uint64(len(in)) {
				break // truncated payload: the server sees EOF in it
			}
			in = in[r.length:]
		}
		plan = append(plan, r)
	}
	return plan
}

// handshakePrefix is a client handshake ending in NBD_OPT_GO for "e".
func handshakePrefix(structured bool) []byte {
	b := binary.BigEndian.AppendUint32(nil, nbdtest.FlagFixedNewstyle|nbdtest.FlagNoZeroes)
	if structured {
		b = append(b, nbdtest.Option(nbdtest.OptStructuredReply, nil)...)
		b = append(b, nbdtest.Option(nbdtest.OptSetMetaContext, nbdtest.MetaContextData("e", "base:allocation"))...)
	}
	return append(b, nbdtest.Option(nbdtest.OptGo, nbdtest.InfoData("e", nbdtest.InfoBlockSize))...)
}

// bitmapPrefix is a client handshake selecting base:allocation and the
// dirty bitmap b1 of "d", then NBD_OPT_GO for "d".
func bitmapPrefix() []byte {
	b := binary.BigEndian.AppendUint32(nil, nbdtest.FlagFixedNewstyle|nbdtest.FlagNoZeroes)
	b = append(b, nbdtest.Option(nbdtest.OptStructuredReply, nil)...)
	b = append(b, nbdtest.Option(nbdtest.OptSetMetaContext, nbdtest.MetaContextData("d", "base:allocation", "qemu:dirty-bitmap:b1"))...)
	return append(b, nbdtest.Option(nbdtest.OptGo, nbdtest.InfoData("d", nbdtest.InfoBlockSize))...)
}

// skipHandshake removes the greeting and the replies to handshakePrefix
// (or bitmapPrefix).
func skipHandshake(t *testing.T, out []byte, structured bool) []byte {
	t.Helper()
	if len(out) < 18 {
		t.Fatalf("no greeting")
	}
	out = out[18:]
	finals := 1
	if structured {
		finals = 3
	}
	for finals > 0 {
		if len(out) < 20 {
			t.Fatalf("handshake replies truncated")
		}
		typ, n := binary.BigEndian.Uint32(out[12:]), binary.BigEndian.Uint32(out[16:])
		if typ&(1<<31) != 0 {
			t.Fatalf("handshake option refused: %#x", typ)
		}
		out = out[20+n:]
		if typ == nbdtest.RepAck {
			finals--
		}
	}
	return out
}

// checkReplies is the oracle of FuzzTransmissionRequests.
func checkReplies(plan []plannedRequest, out []byte, structured bool, contexts int) error {
	done := make([]bool, len(plan))
	covered := make([]uint64, len(plan))
	// the contexts (ids 1..contexts: base:allocation, then the dirty
	// bitmap) a block status answered so far, one bit each; an error
	// excuses the rest
	statusSeen := make([]uint32, len(plan))
	failed := make([]bool, len(plan))
	remaining := len(plan)
	for len(out) > 0 {
		if len(out) < 4 {
			return fmt.Errorf("trailing %d bytes", len(out))
		}
		switch binary.BigEndian.Uint32(out) {
		case nbdtest.MagicSimple:
			if len(out) < 16 {
				return fmt.Errorf("simple reply truncated")
			}
			errno, cookie := binary.BigEndian.Uint32(out[4:]), binary.BigEndian.Uint64(out[8:])
			out = out[16:]
			if cookie >= uint64(len(plan)) || done[cookie] {
				return fmt.Errorf("simple reply for cookie %d: not pending", cookie)
			}
			r := plan[cookie]
			if r.typ == nbdtest.CmdRead && structured {
				return fmt.Errorf("simple reply to a READ with structured replies")
			}
			if r.typ == nbdtest.CmdRead && errno == 0 {
				if uint64(len(out)) < uint64(r.length) {
					return fmt.Errorf("read data truncated")
				}
				out = out[r.length:]
			}
			done[cookie] = true
			remaining--
		case nbdtest.MagicStructured:
			if !structured {
				return fmt.Errorf("structured chunk without negotiation")
			}
			if len(out) < 20 {
				return fmt.Errorf("chunk header truncated")
			}
			flags, typ := binary.BigEndian.Uint16(out[4:]), binary.BigEndian.Uint16(out[6:])
			cookie, n := binary.BigEndian.Uint64(out[8:]), binary.BigEndian.Uint32(out[16:])
			out = out[20:]
			if uint64(n) > uint64(len(out)) {
				return fmt.Errorf("chunk payload truncated")
			}
			p := out[:n]
			out = out[n:]
			if cookie >= uint64(len(plan)) || done[cookie] {
				return fmt.Errorf("chunk for cookie %d: not pending", cookie)
			}
			r := plan[cookie]
			switch typ {
			case nbdtest.ReplyTypeNone:
				if n != 0 || flags&nbdtest.ReplyFlagDone == 0 {
					return fmt.Errorf("bad NONE chunk")
				}
			case nbdtest.ReplyTypeOffsetData, nbdtest.ReplyTypeOffsetHole:
				if r.typ != nbdtest.CmdRead || n < 9 || (typ == nbdtest.ReplyTypeOffsetHole && n != 12) {
					return fmt.Errorf("bad content chunk type %d len %d for command %d", typ, n, r.typ)
				}
				off, size := binary.BigEndian.Uint64(p), uint64(n-8)
				if typ == nbdtest.ReplyTypeOffsetHole {
					size = uint64(binary.BigEndian.Uint32(p[8:]))
				}
				if size == 0 || off < r.off || off+size > r.off+uint64(r.length) {
					return fmt.Errorf("content chunk %d+%d outside %d+%d", off, size, r.off, r.length)
				}
				covered[cookie] += size
			case nbdtest.ReplyTypeBlockStatus:
				id := uint32(0)
				if n >= 4 {
					id = binary.BigEndian.Uint32(p)
				}
				if r.typ != nbdtest.CmdBlockStatus || n < 12 || (n-4)%8 != 0 || id < 1 || id > uint32(contexts) || statusSeen[cookie]&(1<<id) != 0 {
					return fmt.Errorf("bad block status chunk (context %d of %d)", id, contexts)
				}
				statusSeen[cookie] |= 1 << id
				valid := uint32(3) // base:allocation: hole, zero
				if id > 1 {
					valid = 1 // qemu:dirty-bitmap: dirty
				}
				for i := 4; i < int(n); i += 8 {
					if binary.BigEndian.Uint32(p[i:]) == 0 {
						return fmt.Errorf("empty extent")
					}
					if binary.BigEndian.Uint32(p[i+4:])&^valid != 0 {
						return fmt.Errorf("context %d: flags %#x", id, binary.BigEndian.Uint32(p[i+4:]))
					}
				}
			case nbdtest.ReplyTypeError, nbdtest.ReplyTypeErrorOffset:
				if n < 6 || binary.BigEndian.Uint32(p) == 0 || uint32(binary.BigEndian.Uint16(p[4:])) > n-6 {
					return fmt.Errorf("bad error chunk")
				}
				covered[cookie] = uint64(r.length) // an error excuses missing data
				failed[cookie] = true
			default:
				return fmt.Errorf("unknown chunk type %d", typ)
			}
			if flags&nbdtest.ReplyFlagDone != 0 {
				if r.typ == nbdtest.CmdRead && covered[cookie] != uint64(r.length) {
					return fmt.Errorf("read of %d answered with %d bytes", r.length, covered[cookie])
				}
				if r.typ == nbdtest.CmdBlockStatus && !failed[cookie] && statusSeen[cookie] != 0 && statusSeen[cookie] != (1<<(contexts+1))-2 {
					return fmt.Errorf("block status answered contexts %#b of %d", statusSeen[cookie], contexts)
				}
				done[cookie] = true
				remaining--
			}
		default:
			return fmt.Errorf("reply magic %#x: stream out of step", binary.BigEndian.Uint32(out))
		}
	}
	if remaining != 0 {
		return fmt.Errorf("%d of %d requests got no reply", remaining, len(plan))
	}
	return nil
}

func handshakeSeeds() [][]byte {
	flags := binary.BigEndian.AppendUint32(nil, nbdtest.FlagFixedNewstyle|nbdtest.FlagNoZeroes)
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	return [][]byte{
		cat(flags, nbdtest.Option(nbdtest.OptList, nil), nbdtest.Option(nbdtest.OptAbort, nil)),
		cat(flags, nbdtest.Option(nbdtest.OptInfo, nbdtest.InfoData("e", 0, 1, 2, 3)), nbdtest.Option(nbdtest.OptGo, nbdtest.InfoData(""))),
		cat(flags, nbdtest.Option(nbdtest.OptStructuredReply, nil),
			nbdtest.Option(nbdtest.OptListMetaContext, nbdtest.MetaContextData("e")),
			nbdtest.Option(nbdtest.OptListMetaContext, nbdtest.MetaContextData("d", "qemu:", "qemu:dirty-bitmap:")),
			nbdtest.Option(nbdtest.OptSetMetaContext, nbdtest.MetaContextData("e", "base:allocation", "base:", "x-y:z")),
			nbdtest.Option(nbdtest.OptSetMetaContext, nbdtest.MetaContextData("d", "base:allocation", "qemu:dirty-bitmap:b1", "qemu:dirty-bitmap:b2")),
			nbdtest.Option(nbdtest.OptGo, nbdtest.InfoData("e", 3))),
		cat(flags, nbdtest.Option(99, []byte("junk")), nbdtest.Option(nbdtest.OptStartTLS, nil), nbdtest.Option(nbdtest.OptExportName, []byte("e"))),
		cat(binary.BigEndian.AppendUint32(nil, 0), nbdtest.Option(nbdtest.OptExportName, nil)),
		cat(flags, nbdtest.Option(nbdtest.OptInfo, []byte{0, 0, 0, 9, 'e'})),
	}
}

func transmissionSeeds() [][]byte {
	req := nbdtest.Request
	cat := func(mode byte, parts ...[]byte) []byte { return append([]byte{mode}, bytes.Join(parts, nil)...) }
	common := [][]byte{
		req(0, nbdtest.CmdWrite, 0, 4096, 16, []byte("0123456789abcdef")),
		req(0, nbdtest.CmdRead, 0, 4000, 200, nil),
		req(nbdtest.CmdFlagFUA, nbdtest.CmdWrite, 0, 0, 3, []byte("abc")),
		req(0, nbdtest.CmdFlush, 0, 0, 0, nil),
		req(0, nbdtest.CmdTrim, 0, 0, 65536, nil),
		req(nbdtest.CmdFlagNoHole, nbdtest.CmdWriteZeroes, 0, 100, 1000, nil),
		req(nbdtest.CmdFlagFastZero, nbdtest.CmdWriteZeroes, 0, 0, 1<<20, nil),
		req(0, nbdtest.CmdCache, 0, 0, 4096, nil),
		req(0, nbdtest.CmdRead, 0, 1<<20, 1, nil),
		req(0, 77, 0, 0, 0, nil),
		req(0, nbdtest.CmdWrite, 0, 0, 40<<20, nil),
	}
	structured := append(bytes.Clone(bytes.Join(common, nil)),
		bytes.Join([][]byte{
			req(0, nbdtest.CmdBlockStatus, 0, 0, 1<<20, nil),
			req(nbdtest.CmdFlagReqOne, nbdtest.CmdBlockStatus, 0, 4096, 100, nil),
			req(nbdtest.CmdFlagDF, nbdtest.CmdRead, 0, 0, 70000, nil),
			req(0, nbdtest.CmdRead, 0, 0, 200000, nil),
		}, nil)...)
	return [][]byte{
		cat(modeKernel, common...),
		cat(modeSimple|modeFixMagic, common...),
		cat(modeStructured, structured),
		cat(modeStructured, req(0, nbdtest.CmdDisc, 0, 0, 0, nil), req(0, nbdtest.CmdRead, 0, 0, 1, nil)),
		cat(modeSimple, []byte{0x12, 0x56, 0x09, 0x53}, make([]byte, 24)),
		cat(modeBitmap|modeFixMagic, structured, req(0, nbdtest.CmdBlockStatus, 0, fuzzExportSize/2-100, 1000, nil)),
	}
}

// TestWriteFuzzSeeds rewrites the committed seed corpora from the seed
// functions when NBD_WRITE_FUZZ_SEEDS=1; otherwise it checks that they
// are there.
func TestWriteFuzzSeeds(t *testing.T) {
	for name, seeds := range map[string][][]byte{
		"FuzzHandshakeOptions":     handshakeSeeds(),
		"FuzzTransmissionRequests": transmissionSeeds(),
	} {
		dir := filepath.Join("testdata", "fuzz", name)
		if os.Getenv("NBD_WRITE_FUZZ_SEEDS") == "1" {
			os.MkdirAll(dir, 0o755)
			for i, s := range seeds {
				body := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", s)
				if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("seed-%02d", i)), []byte(body), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		}
		files, _ := filepath.Glob(filepath.Join(dir, "*"))
		if len(files) < len(seeds) {
			t.Errorf("%s: %d committed seeds, want at least %d (run with NBD_WRITE_FUZZ_SEEDS=1)", dir, len(files), len(seeds))
		}
	}
}
