package nbd_test

import (
	"bufio"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/purerbd/purerbd/nbd/nbdtest"
)

// rawConn is a hand-driven NBD connection for sending malformed bytes.
type rawConn struct {
	t  *testing.T
	c  net.Conn
	br *bufio.Reader
}

func dialRaw(t *testing.T, srv *nbdtest.Server) *rawConn {
	t.Helper()
	c, err := net.Dial("unix", srv.Socket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(20 * time.Second))
	return &rawConn{t: t, c: c, br: bufio.NewReader(c)}
}

// greet reads the greeting and sends client flags.
func (r *rawConn) greet(clientFlags uint32) uint16 {
	r.t.Helper()
	hf, err := nbdtest.ReadGreeting(r.br)
	if err != nil {
		r.t.Fatal(err)
	}
	r.send(binary.BigEndian.AppendUint32(nil, clientFlags))
	return hf
}

func (r *rawConn) send(b []byte) {
	r.t.Helper()
	if _, err := r.c.Write(b); err != nil {
		r.t.Fatalf("send: %v", err)
	}
}

func (r *rawConn) optReply() nbdtest.OptReply {
	r.t.Helper()
	rep, err := nbdtest.ReadOptReply(r.br)
	if err != nil {
		r.t.Fatalf("option reply: %v", err)
	}
	return rep
}

// expectOpt sends an option and checks the type of its final reply.
func (r *rawConn) expectOpt(opt uint32, data []byte, want uint32) []nbdtest.OptReply {
	r.t.Helper()
	r.send(nbdtest.Option(opt, data))
	var all []nbdtest.OptReply
	for {
		rep := r.optReply()
		if rep.Option != opt {
			r.t.Fatalf("reply for option %d, want %d", rep.Option, opt)
		}
		all = append(all, rep)
		if rep.Type == nbdtest.RepAck || rep.Type&(1<<31) != 0 {
			if rep.Type != want {
				r.t.Fatalf("option %d: final reply %#x (%q), want %#x", opt, rep.Type, rep.Data, want)
			}
			return all
		}
	}
}

// expectClosed checks that the server closed the connection without
// sending anything more.
func (r *rawConn) expectClosed() {
	r.t.Helper()
	r.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	b, err := r.br.ReadByte()
	if err == nil {
		r.t.Fatalf("server sent %#x, want the connection closed", b)
	}
	if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			r.t.Fatalf("server kept the connection open")
		}
	}
}

// simpleReply reads a simple reply (without data) and returns its error
// and cookie.
func (r *rawConn) simpleReply() (uint32, uint64) {
	r.t.Helper()
	var h [16]byte
	if _, err := io.ReadFull(r.br, h[:]); err != nil {
		r.t.Fatalf("read reply: %v", err)
	}
	if m := binary.BigEndian.Uint32(h[:]); m != nbdtest.MagicSimple {
		r.t.Fatalf("reply magic %#x, want a simple reply", m)
	}
	return binary.BigEndian.Uint32(h[4:]), binary.BigEndian.Uint64(h[8:])
}

// goExport finishes the handshake with NBD_OPT_GO.
func (r *rawConn) goExport(name string) {
	r.t.Helper()
	r.expectOpt(nbdtest.OptGo, nbdtest.InfoData(name), nbdtest.RepAck)
}

func TestRawUnknownOptionsKeepSync(t *testing.T) {
	srv, _ := nbdtest.StartMemory(t, "e", 1<<20)
	r := dialRaw(t, srv)
	r.greet(nbdtest.FlagFixedNewstyle)
	r.expectOpt(99, []byte("some data the server must skip"), nbdtest.RepErrUnsup)
	r.expectOpt(4, nil, nbdtest.RepErrUnsup)  // PEEK_EXPORT, withdrawn
	r.expectOpt(11, nil, nbdtest.RepErrUnsup) // EXTENDED_HEADERS, not offered
	r.expectOpt(0xffffffff, make([]byte, 1000), nbdtest.RepErrUnsup)
	r.expectOpt(nbdtest.OptList, []byte{1}, nbdtest.RepErrInvalid)
	r.expectOpt(nbdtest.OptStructuredReply, []byte{1}, nbdtest.RepErrInvalid)
	r.expectOpt(nbdtest.OptStartTLS, nil, nbdtest.RepErrPolicy)
	reps := r.expectOpt(nbdtest.OptList, nil, nbdtest.RepAck)
	if len(reps) != 2 || reps[0].Type != nbdtest.RepServer || string(reps[0].Data[4:]) != "e" {
		t.Fatalf("LIST: %+v", reps)
	}
	r.goExport("e")
	r.send(nbdtest.Request(0, nbdtest.CmdFlush, 7, 0, 0, nil))
	if e, c := r.simpleReply(); e != 0 || c != 7 {
		t.Fatalf("flush after haggling: error %d cookie %d", e, c)
	}
}

func TestRawMalformedInfoAndMeta(t *testing.T) {
	srv, _ := nbdtest.StartMemory(t, "e", 1<<20)
	r := dialRaw(t, srv)
	r.greet(nbdtest.FlagFixedNewstyle)
	// Name length past the data, short data, trailing bytes.
	r.expectOpt(nbdtest.OptInfo, []byte{0, 0, 1, 0, 'e', 0, 0}, nbdtest.RepErrInvalid)
	r.expectOpt(nbdtest.OptGo, []byte{0, 0}, nbdtest.RepErrInvalid)
	r.expectOpt(nbdtest.OptGo, append(nbdtest.InfoData("e", 3), 9), nbdtest.RepErrInvalid)
	r.expectOpt(nbdtest.OptInfo, nbdtest.InfoData("nope"), nbdtest.RepErrUnknown)
	// Meta contexts need structured replies first.
	r.expectOpt(nbdtest.OptSetMetaContext, nbdtest.MetaContextData("e", "base:allocation"), nbdtest.RepErrInvalid)
	r.expectOpt(nbdtest.OptStructuredReply, nil, nbdtest.RepAck)
	// A query count that cannot fit, a query running past the data.
	bad := nbdtest.MetaContextData("e")
	binary.BigEndian.PutUint32(bad[len(bad)-4:], 1<<30)
	r.expectOpt(nbdtest.OptSetMetaContext, bad, nbdtest.RepErrInvalid)
	bad = nbdtest.MetaContextData("e", "base:allocation")
	r.expectOpt(nbdtest.OptListMetaContext, bad[:len(bad)-3], nbdtest.RepErrInvalid)
	r.expectOpt(nbdtest.OptSetMetaContext, nbdtest.MetaContextData("zz", "base:allocation"), nbdtest.RepErrUnknown)
	// Unknown namespaces are ignored; base: lists but does not select.
	reps := r.expectOpt(nbdtest.OptSetMetaContext, nbdtest.MetaContextData("e", "qemu:dirty-bitmap:x", "base:"), nbdtest.RepAck)
	if len(reps) != 1 {
		t.Fatalf("SET with nothing to select: %+v", reps)
	}
	reps = r.expectOpt(nbdtest.OptListMetaContext, nbdtest.MetaContextData("e", "base:"), nbdtest.RepAck)
	if len(reps) != 2 || string(reps[0].Data[4:]) != "base:allocation" {
		t.Fatalf("LIST base: %+v", reps)
	}
	reps = r.expectOpt(nbdtest.OptSetMetaContext, nbdtest.MetaContextData("e", "base:allocation"), nbdtest.RepAck)
	if len(reps) != 2 || reps[0].Type != nbdtest.RepMetaContext {
		t.Fatalf("SET base:allocation: %+v", reps)
	}
	// INFO answers with the items asked for.
	reps = r.expectOpt(nbdtest.OptInfo, nbdtest.InfoData("e", nbdtest.InfoName, nbdtest.InfoDescription, nbdtest.InfoBlockSize, 999), nbdtest.RepAck)
	seen := map[uint16]bool{}
	for _, rep := range reps[:len(reps)-1] {
		seen[binary.BigEndian.Uint16(rep.Data)] = true
	}
	if !seen[nbdtest.InfoExport] || !seen[nbdtest.InfoName] || !seen[nbdtest.InfoBlockSize] || seen[nbdtest.InfoDescription] {
		t.Fatalf("INFO items: %v", seen)
	}
	r.goExport("e")
	// Block status works: the context was selected for this export.
	r.send(nbdtest.Request(0, nbdtest.CmdBlockStatus, 1, 0, 4096, nil))
	var h [20]byte
	if _, err := io.ReadFull(r.br, h[:]); err != nil {
		t.Fatal(err)
	}
	if binary.BigEndian.Uint32(h[:]) != nbdtest.MagicStructured || binary.BigEndian.Uint16(h[6:]) != nbdtest.ReplyTypeBlockStatus {
		t.Fatalf("block status reply header % x", h)
	}
}

func TestRawOptionLengthLimits(t *testing.T) {
	srv, _ := nbdtest.StartMemory(t, "e", 1<<20)
	r := dialRaw(t, srv)
	r.greet(nbdtest.FlagFixedNewstyle)
	r.expectOpt(nbdtest.OptInfo, make([]byte, 100<<10), nbdtest.RepErrTooBig)
	r.expectOpt(nbdtest.OptList, nil, nbdtest.RepAck)
	// Beyond what the server reads through, it hangs up.
	h := nbdtest.Option(nbdtest.OptInfo, nil)
	binary.BigEndian.PutUint32(h[12:], 1<<30)
	r.send(h)
	r.expectClosed()
}

func TestRawHandshakeViolationsClose(t *testing.T) {
	srv, _ := nbdtest.StartMemory(t, "e", 1<<20)
	t.Run("client flags", func(t *testing.T) {
		r := dialRaw(t, srv)
		r.greet(1 << 7)
		r.expectClosed()
	})
	t.Run("option magic", func(t *testing.T) {
		r := dialRaw(t, srv)
		r.greet(nbdtest.FlagFixedNewstyle)
		o := nbdtest.Option(nbdtest.OptList, nil)
		o[0] ^= 0xff
		r.send(o)
		r.expectClosed()
	})
	t.Run("unknown export name", func(t *testing.T) {
		r := dialRaw(t, srv)
		r.greet(nbdtest.FlagFixedNewstyle)
		r.send(nbdtest.Option(nbdtest.OptExportName, []byte("nope")))
		r.expectClosed()
	})
	t.Run("option after abort", func(t *testing.T) {
		r := dialRaw(t, srv)
		r.greet(nbdtest.FlagFixedNewstyle)
		r.expectOpt(nbdtest.OptAbort, []byte("ignored"), nbdtest.RepAck)
		r.c.Write(nbdtest.Option(nbdtest.OptList, nil))
		r.expectClosed()
	})
}

func TestRawExportName(t *testing.T) {
	srv, _ := nbdtest.StartMemory(t, "e", 1<<20)
	for _, noZeroes := range []bool{false, true} {
		r := dialRaw(t, srv)
		flags := uint32(nbdtest.FlagFixedNewstyle)
		if noZeroes {
			flags |= nbdtest.FlagNoZeroes
		}
		if hf := r.greet(flags); hf != nbdtest.FlagFixedNewstyle|nbdtest.FlagNoZeroes {
			t.Fatalf("handshake flags %#x", hf)
		}
		r.send(nbdtest.Option(nbdtest.OptExportName, []byte("e")))
		// Send a request at once: its reply must follow the export info
		// exactly, which checks the number of padding bytes.
		r.send(nbdtest.Request(0, nbdtest.CmdRead, 42, 0, 16, nil))
		n := 10 + 124
		if noZeroes {
			n = 10
		}
		info := make([]byte, n)
		if _, err := io.ReadFull(r.br, info); err != nil {
			t.Fatal(err)
		}
		if binary.BigEndian.Uint64(info) != 1<<20 {
			t.Fatalf("size %d", binary.BigEndian.Uint64(info))
		}
		if e, c := r.simpleReply(); e != 0 || c != 42 {
			t.Fatalf("noZeroes=%v: read reply error %d cookie %d", noZeroes, e, c)
		}
		data := make([]byte, 16)
		if _, err := io.ReadFull(r.br, data); err != nil {
			t.Fatal(err)
		}
	}
}

func TestRawTransmissionErrorsKeepSync(t *testing.T) {
	srv, _ := nbdtest.StartMemory(t, "e", 1<<20)
	r := dialRaw(t, srv)
	r.greet(nbdtest.FlagFixedNewstyle)
	r.goExport("e")
	check := func(cookie uint64, want uint32) {
		t.Helper()
		e, c := r.simpleReply()
		if c != cookie || e != want {
			t.Fatalf("cookie %d: error %d, want cookie %d error %d", c, e, cookie, want)
		}
	}
	// Over-size WRITE: the payload is consumed, the answer is EINVAL.
	r.send(nbdtest.Request(0, nbdtest.CmdWrite, 1, 0, 40<<20, make([]byte, 40<<20)))
	check(1, nbdtest.EINVAL)
	// WRITE with a flag that is not valid for it: payload consumed too.
	r.send(nbdtest.Request(nbdtest.CmdFlagDF, nbdtest.CmdWrite, 2, 0, 512, make([]byte, 512)))
	check(2, nbdtest.EINVAL)
	// WRITE past the end: ENOSPC, payload consumed.
	r.send(nbdtest.Request(0, nbdtest.CmdWrite, 3, 1<<20-100, 512, make([]byte, 512)))
	check(3, nbdtest.ENOSPC)
	r.send(nbdtest.Request(0, 99, 4, 0, 0, nil))
	check(4, nbdtest.EINVAL)
	r.send(nbdtest.Request(0, nbdtest.CmdFlush, 5, 1, 0, nil))
	check(5, nbdtest.EINVAL)
	r.send(nbdtest.Request(0, nbdtest.CmdBlockStatus, 6, 0, 512, nil))
	check(6, nbdtest.EINVAL)
	r.send(nbdtest.Request(0, nbdtest.CmdRead, 7, 1<<63, 512, nil))
	check(7, nbdtest.EINVAL)
	r.send(nbdtest.Request(0, nbdtest.CmdRead, 8, 0, 33<<20, nil))
	check(8, nbdtest.EINVAL)
	r.send(nbdtest.Request(0, nbdtest.CmdWriteZeroes, 9, 1<<20, 1, nil))
	check(9, nbdtest.ENOSPC)
	r.send(nbdtest.Request(0, nbdtest.CmdTrim, 10, ^uint64(0)-10, 100, nil))
	check(10, nbdtest.EINVAL)
	// Zero-length requests succeed.
	r.send(nbdtest.Request(0, nbdtest.CmdRead, 11, 0, 0, nil))
	check(11, 0)
	r.send(nbdtest.Request(0, nbdtest.CmdWrite, 12, 1<<20, 0, nil))
	check(12, 0)
	// The stream is still in step: a write and a read of it.
	r.send(nbdtest.Request(0, nbdtest.CmdWrite, 13, 100, 5, []byte("hello")))
	check(13, 0)
	r.send(nbdtest.Request(0, nbdtest.CmdRead, 14, 100, 5, nil))
	check(14, 0)
	got := make([]byte, 5)
	io.ReadFull(r.br, got)
	if string(got) != "hello" {
		t.Fatalf("read back %q", got)
	}
	// A WRITE far over the limit is not read through: hang up.
	r.send(nbdtest.Request(0, nbdtest.CmdWrite, 15, 0, 1<<31, nil))
	r.expectClosed()
}

func TestRawBadRequestMagicCloses(t *testing.T) {
	srv, _ := nbdtest.StartMemory(t, "e", 1<<20)
	r := dialRaw(t, srv)
	r.greet(nbdtest.FlagFixedNewstyle)
	r.goExport("e")
	req := nbdtest.Request(0, nbdtest.CmdRead, 1, 0, 512, nil)
	req[0] = 0x12 // the historic magic 0x12560953 is not accepted either
	req[1], req[2], req[3] = 0x56, 0x09, 0x53
	r.send(req)
	r.expectClosed()
}

func TestRawDiscAnswersInFlight(t *testing.T) {
	srv, _ := nbdtest.StartMemory(t, "e", 1<<20)
	r := dialRaw(t, srv)
	r.greet(nbdtest.FlagFixedNewstyle)
	r.goExport("e")
	// Requests then DISC in one write: all are answered before the close.
	var b []byte
	for i := uint64(1); i <= 20; i++ {
		b = append(b, nbdtest.Request(0, nbdtest.CmdWrite, i, i*4096, 4096, make([]byte, 4096))...)
	}
	b = append(b, nbdtest.Request(0, nbdtest.CmdDisc, 0, 0, 0, nil)...)
	r.send(b)
	seen := map[uint64]bool{}
	for range 20 {
		e, c := r.simpleReply()
		if e != 0 || seen[c] {
			t.Fatalf("reply error %d cookie %d (seen %v)", e, c, seen[c])
		}
		seen[c] = true
	}
	r.expectClosed()
}
