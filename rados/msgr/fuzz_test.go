package msgr

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/purerbd/purerbd/internal/alloctest"
	"github.com/purerbd/purerbd/rados/crc32c"
	"github.com/purerbd/purerbd/rados/denc"
)

// Fuzz targets for everything msgr decodes from the network. Their seed
// corpora under testdata/fuzz were captured from a real Ceph 16.2
// monitor session (crc mode) and from frames this package encodes in
// secure mode; regenerate them with
// PURERBD_WRITE_FUZZ_SEEDS=1 go test -run TestWriteFuzzSeeds.

// fuzzLimits keep allocations small while fuzzing.
var fuzzLimits = limits{control: 1 << 20, front: 1 << 20, middle: 1 << 20, data: 4 << 20}

// frameLookahead is what a frame reader may allocate beyond the bytes it
// received: its probe scratch and, for the last frame of a stream that
// ends early, a buffer of up to probeLen for segments announced but not
// sent (a larger segment is read through the probe first).
const frameLookahead = 2*probeLen + 4096

// FuzzBanner parses a peer banner.
func FuzzBanner(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		var bn banner
		var err error
		alloctest.Check(t, len(b), func() { bn, err = readBanner(bytes.NewReader(b)) })
		if err == nil {
			_ = bn.check()
		}
	})
}

// FuzzHello decodes a HELLO control payload.
func FuzzHello(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		var h helloFrame
		var err error
		alloctest.Check(t, len(b), func() { h, err = decodeHello(b) })
		if err == nil {
			if _, err := decodeHello(h.encode()); err != nil {
				t.Fatalf("re-encoded HELLO does not decode: %v", err)
			}
		}
	})
}

// controlDecoders are the decoders of session and handshake payloads.
var controlDecoders = []func([]byte) error{
	func(b []byte) error { _, err := decodeAuthBadMethod(b); return err },
	func(b []byte) error { _, err := decodeAuthDone(b); return err },
	func(b []byte) error { _, err := decodeServerIdent(b); return err },
	func(b []byte) error { _, err := decodeBlobFrame("AUTH_REPLY_MORE", b); return err },
	func(b []byte) error { _, err := decodeU64("ACK", b); return err },
	func(b []byte) error { _, err := decodeStamp("KEEPALIVE2", b); return err },
	func(b []byte) error { _, _, err := decodeHeader2(b); return err },
}

// FuzzControl decodes a control payload; the first byte picks the kind.
func FuzzControl(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) == 0 {
			return
		}
		alloctest.Check(t, len(b), func() { _ = controlDecoders[int(b[0])%len(controlDecoders)](b[1:]) })
	})
}

// FuzzFramePlain reads crc-mode frames from arbitrary bytes. With an
// even first byte the harness first fixes the crcs of the first frame,
// so mutations of lengths and payloads get past them.
func FuzzFramePlain(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) == 0 {
			return
		}
		wire := b[1:]
		if b[0]&1 == 0 {
			wire = fixPlainFrame(wire)
		}
		fr := newFrameReader(fuzzLimits)
		// With the second bit set, data segments go to an owner's
		// buffer that the owner withdraws now and then: every claim
		// must be released exactly once.
		claims, keeps := 0, 0
		if b[0]&2 != 0 {
			dst := make([]byte, 256<<10)
			fr.dataBuf = func(_ []byte, n uint32) []byte {
				if int(n) > len(dst) {
					return nil
				}
				claims++
				return dst[:n]
			}
			fr.dataKeep = func() bool {
				keeps++
				return keeps%3 != 0
			}
			fr.dataDone = func() bool {
				claims--
				if claims != 0 {
					t.Fatalf("%d claims outstanding at a release", claims)
				}
				return keeps%2 == 0
			}
		}
		alloctest.CheckAllowing(t, len(b), frameLookahead, func() {
			r := bytes.NewReader(wire)
			for i := 0; i < 16; i++ {
				fm, err := fr.read(r)
				if claims != 0 {
					t.Fatalf("a claimed buffer was not released (err %v)", err)
				}
				if err != nil {
					return
				}
				if fm.tag == tagMessage {
					_, _, _ = decodeHeader2(fm.segs[0])
				}
			}
		})
	})
}

// FuzzFrameSecure reads secure-mode frames. With an odd first byte the
// rest is taken as ciphertext as is (tags almost never verify); with an
// even one the harness seals the first 80 bytes as the preamble block and
// the following chunks with the sizes the preamble announces, so the
// checks behind authentication see arbitrary lengths and truncations.
func FuzzFrameSecure(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) == 0 {
			return
		}
		_, tx, err := newGCMPair(testSecret)
		if err != nil {
			t.Fatal(err)
		}
		_, fr := pairCodecs(t, true)
		fr.lim = fuzzLimits
		wire := b[1:]
		if b[0]&1 == 0 {
			wire = sealFuzzFrame(tx, b[1:])
		}
		alloctest.CheckAllowing(t, len(b), frameLookahead, func() {
			r := bytes.NewReader(wire)
			for i := 0; i < 4; i++ {
				if _, err := fr.read(r); err != nil {
					return
				}
			}
		})
	})
}

// sealFuzzFrame turns plaintext into one secure frame as a sender would
// have sealed it: the preamble crc is fixed up, then the head block, the
// control remainder and the tail are sealed with the sizes the preamble
// announces, as far as p lasts.
func sealFuzzFrame(tx *gcmState, p []byte) []byte {
	const headPlain = preambleLen + inlineLen
	if len(p) < headPlain {
		return p
	}
	head := append(make([]byte, 0, headPlain+gcmTagLen), p[:headPlain]...)
	binary.LittleEndian.PutUint32(head[preambleLen-crcLen:], crc32c.Update(0, head[:preambleLen-crcLen]))
	var pr preamble
	perr := pr.decode(head[:preambleLen], fuzzLimits)
	out := tx.seal(head)
	p = p[headPlain:]
	if perr != nil {
		return append(out, p...)
	}
	if pr.lens[0] > inlineLen {
		out, p = sealChunk(tx, out, p, int(padded(pr.lens[0]-inlineLen)))
	}
	if pr.hasTail() {
		n := gcmBlockLen
		for i := 1; i < maxSegments; i++ {
			n += int(padded(pr.lens[i]))
		}
		out, p = sealChunk(tx, out, p, n)
	}
	return append(out, p...)
}

// sealChunk seals the next n bytes of p, or appends p raw when shorter.
func sealChunk(tx *gcmState, out, p []byte, n int) ([]byte, []byte) {
	if len(p) < n {
		return append(out, p...), nil
	}
	return append(out, tx.seal(append(make([]byte, 0, n+gcmTagLen), p[:n]...))...), p[n:]
}

// fixPlainFrame recomputes the crcs of the first crc-mode frame in p, so
// the fuzzer explores what lies behind them.
func fixPlainFrame(p []byte) []byte {
	p = bytes.Clone(p)
	if len(p) < preambleLen {
		return p
	}
	binary.LittleEndian.PutUint32(p[preambleLen-crcLen:], crc32c.Update(0, p[:preambleLen-crcLen]))
	var pr preamble
	if pr.decode(p[:preambleLen], fuzzLimits) != nil {
		return p
	}
	off := preambleLen + int(pr.lens[0])
	if len(p) < off+crcLen {
		return p
	}
	binary.LittleEndian.PutUint32(p[off:], crc32c.Checksum(p[preambleLen:off]))
	off += crcLen
	if !pr.hasTail() {
		return p
	}
	ep := off
	for i := 1; i < maxSegments; i++ {
		ep += int(pr.lens[i])
	}
	if len(p) < ep+epiloguePlainLen {
		return p
	}
	for i := 1; i < maxSegments; i++ {
		c := uint32(0)
		if i < pr.nseg {
			c = crc32c.Checksum(p[off : off+int(pr.lens[i])])
		}
		binary.LittleEndian.PutUint32(p[ep+1+4*(i-1):], c)
		off += int(pr.lens[i])
	}
	return p
}

// TestWriteFuzzSeeds regenerates the committed seed corpora from a real
// monitor session (crc mode, through the recording proxy) and from
// secure frames built here.
func TestWriteFuzzSeeds(t *testing.T) {
	if os.Getenv("PURERBD_WRITE_FUZZ_SEEDS") == "" {
		t.Skip("set PURERBD_WRITE_FUZZ_SEEDS=1 to regenerate testdata/fuzz")
	}
	requireCluster(t)
	write := func(target, name string, b []byte) {
		dir := filepath.Join("testdata", "fuzz", target)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", b)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	p := newFaultProxy(t, cluster.MonAddrs[0])
	p.mu.Lock()
	p.record = true
	p.mu.Unlock()
	c, err := Dial(ctxT(t, 10*time.Second), cluster.MonAddrs[0], Config{
		Auth: adminCephX(t), PeerType: denc.EntityTypeMon, Mode: ModeCRC, DialContext: p.dial,
		KeepaliveInterval: 20 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	checkMonMap(t, c)
	time.Sleep(100 * time.Millisecond) // a few KEEPALIVE2_ACKs
	c.Close()
	p.mu.Lock()
	rec := bytes.Clone(p.recorded.Bytes())
	p.mu.Unlock()

	write("FuzzBanner", "mon-pacific", rec[:26])
	stream := rec[26:]
	write("FuzzFramePlain", "mon-session", append([]byte{1}, stream...))
	fr := newFrameReader(defaultLimits)
	r := bytes.NewReader(stream)
	kinds := map[uint8]int{
		tagAuthBadMethod: 0, tagAuthDone: 1, tagServerIdent: 2, tagAuthReplyMore: 3,
		tagAck: 4, tagKeepalive2Ack: 5, tagMessage: 6,
	}
	seen := map[uint8]bool{}
	for {
		start := len(stream) - r.Len()
		fm, err := fr.read(r)
		if err != nil {
			break
		}
		if seen[fm.tag] {
			continue
		}
		seen[fm.tag] = true
		raw := stream[start : len(stream)-r.Len()]
		write("FuzzFramePlain", fmt.Sprintf("tag-%d", fm.tag), append([]byte{0}, raw...))
		if fm.tag == tagHello {
			write("FuzzHello", "mon-hello", fm.segs[0])
		}
		if k, ok := kinds[fm.tag]; ok {
			write("FuzzControl", fmt.Sprintf("tag-%d", fm.tag), append([]byte{byte(k)}, fm.segs[0]...))
		}
		// The same control payload sealed as a secure frame.
		_, tx, _ := newGCMPair(testSecret)
		w := &frameWriter{tx: tx}
		segs := fm.segs
		write("FuzzFrameSecure", fmt.Sprintf("tag-%d", fm.tag), append([]byte{1}, flatten(w.build(fm.tag, &segs))...))
	}
	// A message with a data segment, for the owner's buffer (second bit).
	hdr := make([]byte, header2Len)
	encodeHeader2(hdr, &Message{Type: 43, Tid: 1}, 1, 0)
	msg := [maxSegments][]byte{hdr, []byte("front..."), nil, bytes.Repeat([]byte("data"), 75)}
	write("FuzzFramePlain", "message-into", append([]byte{3}, flatten((&frameWriter{}).build(tagMessage, &msg))...))
	write("FuzzControl", "bad-method", append([]byte{0}, 2, 0, 0, 0, 0xf3, 0xff, 0xff, 0xff, 1, 0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0))
	// Secure frames with every segment, and a long control.
	_, tx, _ := newGCMPair(testSecret)
	w := &frameWriter{tx: tx}
	segs := [maxSegments][]byte{make([]byte, header2Len), []byte("front"), []byte("mid"), bytes.Repeat([]byte{7}, 5000)}
	write("FuzzFrameSecure", "message", append([]byte{1}, flatten(w.build(tagMessage, &segs))...))
	segs = [maxSegments][]byte{bytes.Repeat([]byte{9}, 300)}
	write("FuzzFrameSecure", "long-control", append([]byte{1}, flatten(w.build(tagAuthDone, &segs))...))
	// Plaintext seeds for the sealing harness: a preamble announcing a
	// long control and a tail.
	var pre [preambleLen + inlineLen]byte
	(&preamble{tag: tagMessage, nseg: 4, lens: [4]uint32{100, 10, 0, 20}}).encode(pre[:])
	write("FuzzFrameSecure", "sealed-head", append([]byte{0}, append(pre[:], make([]byte, 200)...)...))
	t.Logf("frames seen: %v", seen)
}
