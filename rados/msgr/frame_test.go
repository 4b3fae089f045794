package msgr

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"testing"
)

// testSecret is a fixed connection secret for offline secure-mode tests.
var testSecret = []byte("0123456789abcdef" + "rx-nonce-12b" + "tx-nonce-12b" + "padding to 64 bytes.....")

// pairCodecs returns a writer and a reader that speak to each other:
// crc mode, or secure mode with the reader's rx state equal to the
// writer's tx state (as across a real connection).
func pairCodecs(t testing.TB, secure bool) (*frameWriter, *frameReader) {
	t.Helper()
	fw, fr := &frameWriter{}, newFrameReader(defaultLimits)
	if secure {
		_, tx, err := newGCMPair(testSecret)
		if err != nil {
			t.Fatal(err)
		}
		// The peer receives with our tx key and nonce.
		peerRx, _, err := newGCMPair(append(append(append([]byte{}, testSecret[:16]...), testSecret[28:40]...), testSecret[16:28]...))
		if err != nil {
			t.Fatal(err)
		}
		fw.tx, fr.rx = tx, peerRx
	}
	return fw, fr
}

func modeName(secure bool) string {
	if secure {
		return "secure"
	}
	return "crc"
}

func randBytes(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	seed := [32]byte{byte(r.Uint32()), byte(n)}
	_, _ = rand.NewChaCha8(seed).Read(b)
	return b
}

func TestFrameRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	sizes := [][maxSegments]int{
		{0, 0, 0, 0}, {1, 0, 0, 0}, {41, 0, 0, 0}, {47, 0, 0, 0}, {48, 0, 0, 0}, {49, 0, 0, 0},
		{64, 0, 0, 0}, {1000, 0, 0, 0}, {41, 5, 0, 0}, {41, 0, 7, 0}, {41, 0, 0, 4096},
		{41, 16, 16, 16}, {41, 17, 3, 100000}, {200, 0, 0, 1}, {41, 1 << 20, 0, 3 << 20},
	}
	for _, secure := range []bool{false, true} {
		t.Run(modeName(secure), func(t *testing.T) {
			fw, fr := pairCodecs(t, secure)
			var stream bytes.Buffer
			var want []frame
			for i, sz := range sizes {
				var segs [maxSegments][]byte
				for j, n := range sz {
					segs[j] = randBytes(r, n)
				}
				tag := uint8(1 + i%20)
				bufs := fw.build(tag, &segs)
				if _, err := bufs.WriteTo(&stream); err != nil {
					t.Fatal(err)
				}
				want = append(want, frame{tag: tag, segs: segs})
			}
			for i, w := range want {
				f, err := fr.read(&stream)
				if err != nil {
					t.Fatalf("frame %d (%v): %v", i, sizes[i], err)
				}
				if f.tag != w.tag {
					t.Fatalf("frame %d: tag %d, want %d", i, f.tag, w.tag)
				}
				for j := range f.segs {
					if !bytes.Equal(f.segs[j], w.segs[j]) {
						t.Fatalf("frame %d segment %d differs (%d vs %d bytes)", i, j, len(f.segs[j]), len(w.segs[j]))
					}
					if cap(f.segs[j]) != len(f.segs[j]) {
						t.Fatalf("frame %d segment %d may overlap the next (cap %d)", i, j, cap(f.segs[j]))
					}
				}
			}
			if stream.Len() != 0 {
				t.Fatalf("%d bytes left over", stream.Len())
			}
		})
	}
}

// TestFrameOnWireSize checks the sizes the Linux client computes for
// head and tail.
func TestFrameOnWireSize(t *testing.T) {
	for _, tc := range []struct {
		secure bool
		lens   [maxSegments]int
		want   int
	}{
		{false, [4]int{41, 0, 0, 0}, 32 + 41 + 4},
		{false, [4]int{41, 10, 0, 5}, 32 + 41 + 4 + 10 + 5 + 13},
		{true, [4]int{41, 0, 0, 0}, 96},
		{true, [4]int{100, 0, 0, 0}, 96 + 64 + 16},
		{true, [4]int{41, 10, 0, 5}, 96 + 16 + 16 + 32},
		{true, [4]int{41, 16, 0, 0}, 96 + 16 + 32},
	} {
		fw, _ := pairCodecs(t, tc.secure)
		var segs [maxSegments][]byte
		for i, n := range tc.lens {
			segs[i] = make([]byte, n)
		}
		if got := len(flatten(fw.build(17, &segs))); got != tc.want {
			t.Errorf("%s %v: %d bytes on the wire, want %d", modeName(tc.secure), tc.lens, got, tc.want)
		}
	}
}

// TestFrameCorruption flips every byte of small frames: each flip must
// be caught (crc or GCM tag), never accepted or panicking.
func TestFrameCorruption(t *testing.T) {
	for _, secure := range []bool{false, true} {
		for _, lens := range [][maxSegments]int{{41, 0, 0, 0}, {60, 3, 2, 5}} {
			fw, _ := pairCodecs(t, secure)
			var segs [maxSegments][]byte
			for i, n := range lens {
				segs[i] = bytes.Repeat([]byte{byte(i + 1)}, n)
			}
			wire := flatten(fw.build(17, &segs))
			// In crc mode only the low nibble of the late status byte
			// counts (Ceph masks it), so upper-bit flips there pass.
			lateStatus := -1
			if !secure && lens[1]+lens[2]+lens[3] > 0 {
				lateStatus = len(wire) - epiloguePlainLen
			}
			for i := range wire {
				if i == lateStatus {
					continue
				}
				_, fr := pairCodecs(t, secure)
				bad := bytes.Clone(wire)
				bad[i] ^= 0x40
				if _, err := fr.read(bytes.NewReader(bad)); err == nil {
					t.Fatalf("%s %v: flipping byte %d went unnoticed", modeName(secure), lens, i)
				}
			}
			// Every truncation fails too.
			for n := 0; n < len(wire); n++ {
				_, fr := pairCodecs(t, secure)
				if _, err := fr.read(bytes.NewReader(wire[:n])); err == nil {
					t.Fatalf("%s: %d-byte prefix accepted", modeName(secure), n)
				}
			}
		}
	}
}

func TestPreambleLimits(t *testing.T) {
	var p [preambleLen]byte
	pr := preamble{tag: 17, nseg: 4, lens: [4]uint32{41, 0, 0, 1 << 30}}
	pr.encode(p[:])
	var got preamble
	if err := got.decode(p[:], defaultLimits); !errors.Is(err, ErrProtocol) {
		t.Fatalf("oversized data accepted: %v", err)
	}
	pr = preamble{tag: 17, nseg: 3, lens: [4]uint32{41, 1, 0, 0}}
	pr.encode(p[:])
	if err := got.decode(p[:], defaultLimits); !errors.Is(err, ErrProtocol) {
		t.Fatalf("empty last segment accepted: %v", err)
	}
	pr = preamble{tag: tagWait, nseg: 1}
	pr.encode(p[:])
	if err := got.decode(p[:], defaultLimits); err != nil {
		t.Fatalf("WAIT (empty control) refused: %v", err)
	}
}

func TestBanner(t *testing.T) {
	b := encodeBanner(msgr2Supported, msgr2Required)
	if len(b) != 26 || string(b[:8]) != "ceph v2\n" {
		t.Fatalf("banner %q", b)
	}
	got, err := readBanner(bytes.NewReader(b))
	if err != nil || got.check() != nil || !bytes.Equal(got.raw, b) {
		t.Fatalf("%+v %v", got, err)
	}
	// A longer payload (future fields) is read whole.
	long := append(append([]byte("ceph v2\n"), 20, 0), make([]byte, 20)...)
	long[10] = 3 // supported: revision 1 + compression
	if got, err := readBanner(bytes.NewReader(append(long, 'x'))); err != nil || got.check() != nil || len(got.raw) != 30 {
		t.Fatalf("long banner: %+v %v", got, err)
	}
	for name, in := range map[string][]byte{
		"msgr1":     []byte("ceph v027\n\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"),
		"garbage":   []byte("GET / HTTP/1.1\r\n\r\n....."),
		"short len": append([]byte("ceph v2\n"), 8, 0, 1, 0, 0, 0, 0, 0, 0, 0),
		"truncated": b[:20],
	} {
		if _, err := readBanner(bytes.NewReader(in)); err == nil {
			t.Errorf("%s accepted", name)
		}
	}
	noRev1 := encodeBanner(0, 0)
	if got, _ := readBanner(bytes.NewReader(noRev1)); got.check() == nil {
		t.Error("peer without revision 1 accepted")
	}
	needsMore := encodeBanner(3, 2)
	if got, _ := readBanner(bytes.NewReader(needsMore)); got.check() == nil {
		t.Error("peer requiring compression accepted")
	}
}

func TestHeader2(t *testing.T) {
	m := &Message{Type: 42, Priority: 196, Version: 8, CompatVersion: 3, Tid: 77, DataOff: 4096}
	var p [header2Len]byte
	encodeHeader2(p[:], m, 5, 4)
	got, ack, err := decodeHeader2(p[:])
	if err != nil || ack != 4 || got.Seq != 5 || got.Type != 42 || got.Priority != 196 || got.Version != 8 ||
		got.CompatVersion != 3 || got.Tid != 77 || got.DataOff != 4096 {
		t.Fatalf("%+v ack %d %v", got, ack, err)
	}
	encodeHeader2(p[:], &Message{}, 1, 0)
	if got, _, _ := decodeHeader2(p[:]); got.Priority != PriorityDefault {
		t.Fatalf("default priority %d", got.Priority)
	}
	if _, _, err := decodeHeader2(p[:40]); err == nil {
		t.Fatal("short header accepted")
	}
}

// BenchmarkFrame measures encoding and decoding of MESSAGE frames with a
// data segment, in both modes.
func BenchmarkFrame(b *testing.B) {
	for _, secure := range []bool{false, true} {
		for _, size := range []int{4 << 10, 64 << 10, 4 << 20} {
			hdr := make([]byte, header2Len)
			data := make([]byte, size)
			segs := [maxSegments][]byte{hdr, make([]byte, 200), nil, data}
			b.Run(fmt.Sprintf("encode/%s/%dKiB", modeName(secure), size>>10), func(b *testing.B) {
				fw, _ := pairCodecs(b, secure)
				b.SetBytes(int64(size))
				for b.Loop() {
					bufs := fw.build(tagMessage, &segs)
					if _, err := bufs.WriteTo(io.Discard); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run(fmt.Sprintf("decode/%s/%dKiB", modeName(secure), size>>10), func(b *testing.B) {
				// Pre-encode b.N frames with matching nonces.
				fw, fr := pairCodecs(b, secure)
				one := flatten(fw.build(tagMessage, &segs))
				b.SetBytes(int64(size))
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					b.StopTimer()
					wire := one
					if secure && i > 0 {
						wire = flatten(fw.build(tagMessage, &segs))
					}
					rd := bytes.NewReader(wire)
					b.StartTimer()
					if _, err := fr.read(rd); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// TestFrameSpliceMarks checks which buffers of a batch the writer marks
// to be sent by reference: a frame's data segment when asked, in crc
// mode only, and nothing else.
func TestFrameSpliceMarks(t *testing.T) {
	data := make([]byte, 100)
	for _, secure := range []bool{false, true} {
		fw, _ := pairCodecs(t, secure)
		fw.add(tagMessage, &[maxSegments][]byte{{1}, {2}, nil, data})
		fw.addSummed(tagMessage, &[maxSegments][]byte{{1}, {2}, {3}, data}, nil, true)
		fw.addSummed(tagMessage, &[maxSegments][]byte{{1}, {2}}, nil, true) // no data segment
		switch {
		case secure && len(fw.splice) != 0:
			t.Errorf("secure mode marked buffers %v", fw.splice)
		case !secure && (len(fw.splice) != 1 || &fw.out[fw.splice[0]][0] != &data[0]):
			t.Errorf("crc mode marked buffers %v, want only the second frame's data segment", fw.splice)
		}
		fw.reset()
		if len(fw.splice) != 0 {
			t.Errorf("%s: marks survive reset", modeName(secure))
		}
	}
}
