package luks

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/purerbd/purerbd/internal/alloctest"
	"github.com/purerbd/purerbd/rbd"
)

// memDevice is an in-memory Device for tests that need no cluster.
type memDevice struct {
	mu  sync.Mutex
	b   []byte
	ro  bool
	nwr int
}

func (m *memDevice) ReadAtContext(_ context.Context, p []byte, off int64) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if off >= int64(len(m.b)) {
		return 0, io.EOF
	}
	n := copy(p, m.b[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (m *memDevice) WriteAtContext(_ context.Context, p []byte, off int64) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if off+int64(len(p)) > int64(len(m.b)) {
		return 0, errors.New("memDevice: write past the end")
	}
	m.nwr++
	return copy(m.b[off:], p), nil
}

func (m *memDevice) Size() int64                 { return int64(len(m.b)) }
func (m *memDevice) ReadOnly() bool              { return m.ro }
func (m *memDevice) Flush(context.Context) error { return nil }

// fastKDF returns cheap KDF costs for tests: formatting with a real
// cost many times would make the tests slow, and the costs do not change
// the code paths. TestImageInterop keeps rbd's own default costs.
func fastKDF(version int) FormatOptions {
	o := FormatOptions{Version: version, DigestIterations: 1000}
	if version == 1 {
		o.KDF = KDF{Type: "pbkdf2", Hash: "sha256", Iterations: 1000}
	} else {
		o.KDF = KDF{Type: "argon2id", Time: 1, Memory: 1024, CPUs: 1}
	}
	return o
}

// readKAT reads testdata/rbd-luksN-kat.txt: a volume key and the first
// ciphertext sectors of the data area of an image made by
// `rbd encryption format` and written through librbd by qemu-io
// (see TestKnownAnswer for what was written).
func readKAT(t *testing.T, name string) (key, ct []byte, sectorSize int) {
	t.Helper()
	f, err := os.Open("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		k, v, _ := strings.Cut(sc.Text(), " ")
		switch k {
		case "key":
			key, err = hex.DecodeString(v)
		case "ciphertext":
			ct, err = hex.DecodeString(v)
		case "sectorsize":
			_, err = fmt.Sscan(v, &sectorSize)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return key, ct, sectorSize
}

// TestKnownAnswer decrypts sectors librbd encrypted, and encrypts them
// back to the same ciphertext: AES-XTS with plain64 tweaks counted in
// 512-byte units from the start of the data area (not of the image).
// What qemu-io wrote through librbd: LUKS2 (4096-byte sectors): 0xab at
// 0+4096, 0xcd at 1000+100, 0x5a at 4096+4096; LUKS1 (512-byte
// sectors): 0xab at 0+512, 0x5a at 512+512, 0xcd at 100+10, and nothing
// after (a hole, zero ciphertext, that reads as zeroes).
func TestKnownAnswer(t *testing.T) {
	for _, c := range []struct {
		file  string
		write func(p []byte)
	}{
		{"rbd-luks2-kat.txt", func(p []byte) {
			fill(p[0:4096], 0xab)
			fill(p[1000:1100], 0xcd)
			fill(p[4096:8192], 0x5a)
		}},
		{"rbd-luks1-kat.txt", func(p []byte) {
			fill(p[0:512], 0xab)
			fill(p[512:1024], 0x5a)
			fill(p[100:110], 0xcd)
		}},
	} {
		t.Run(c.file, func(t *testing.T) {
			ctx := context.Background()
			key, ct, ss := readKAT(t, c.file)
			want := make([]byte, len(ct))
			c.write(want)
			h := &Header{SectorSize: ss, KeySize: len(key)}
			dev := &memDevice{b: ct}
			img, err := newImage(dev, h, key)
			if err != nil {
				t.Fatal(err)
			}
			got := make([]byte, len(ct))
			if _, err := img.ReadAtContext(ctx, got, 0); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("decrypted librbd's ciphertext wrong: % x...", got[:32])
			}
			// writing the same plaintext gives librbd's ciphertext back
			orig := append([]byte(nil), ct...)
			written := 1024
			if ss == 4096 {
				written = 8192
			}
			if _, err := img.WriteAtContext(ctx, want[:written], 0); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(dev.b, orig) {
				t.Fatal("encrypting the plaintext did not give librbd's ciphertext")
			}
		})
	}
}

func fill(p []byte, v byte) {
	for i := range p {
		p[i] = v
	}
}

// TestParseRbdHeaders parses headers `rbd encryption format` wrote
// (Ceph 16.2, libcryptsetup 2.6), the fuzz seeds.
func TestParseRbdHeaders(t *testing.T) {
	for _, c := range []struct {
		file       string
		version    int
		dataOffset int64
		sectorSize int
		kdf        string
		area       int64
	}{
		{"rbd-luks1", 1, 4 << 20, 512, "pbkdf2", 4096},
		{"rbd-luks2", 2, 16 << 20, 4096, "argon2id", 32768},
	} {
		b := readSeed(t, "testdata/fuzz/FuzzParse/"+c.file)
		h, err := Parse(b)
		if err != nil {
			t.Fatalf("%s: %v", c.file, err)
		}
		if h.Version != c.version || h.DataOffset != c.dataOffset || h.SectorSize != c.sectorSize || h.KeySize != 64 ||
			len(h.Keyslots) != 1 || h.Keyslots[0].KDF.Type != c.kdf || h.Keyslots[0].AreaOffset != c.area ||
			h.Keyslots[0].Stripes != afStripes {
			t.Errorf("%s: parsed %+v", c.file, h)
		}
	}
}

// TestParseRefuses: not LUKS, a corrupt checksum, a truncated header.
func TestParseRefuses(t *testing.T) {
	seed := readSeed(t, "testdata/fuzz/FuzzParse/rbd-luks2")
	corrupt := append([]byte(nil), seed...)
	corrupt[luks2BinarySize+10] ^= 1
	for _, c := range []struct {
		name string
		b    []byte
		want error
	}{
		{"zeroes", make([]byte, 4096), ErrNotLUKS},
		{"short", seed[:3], ErrNotLUKS},
		{"checksum", corrupt, ErrCorrupt},
		{"truncated", seed[:luks2BinarySize], ErrCorrupt},
	} {
		if _, err := Parse(c.b); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
}

// readSeed reads a []byte fuzz seed file.
func readSeed(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	_, lit, ok := strings.Cut(string(b), "[]byte(")
	if !ok {
		t.Fatalf("%s: not a []byte seed", path)
	}
	var s string
	if _, err := fmt.Sscanf(strings.TrimSuffix(strings.TrimSpace(lit), ")"), "%q", &s); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return []byte(s)
}

// TestFormatUnlock formats headers, parses them back and unlocks them;
// a wrong passphrase is ErrWrongPassphrase.
func TestFormatUnlock(t *testing.T) {
	ctx := context.Background()
	for _, v := range []int{1, 2} {
		for _, ks := range []int{32, 64} {
			t.Run(fmt.Sprintf("luks%d-key%d", v, ks), func(t *testing.T) {
				o := fastKDF(v)
				o.KeySize = ks
				o.Alignment = 4 << 20
				b, h, key, err := Format([]byte("pass word"), o)
				if err != nil {
					t.Fatal(err)
				}
				wantOff := int64(4 << 20)
				if v == 2 {
					wantOff = 16 << 20
				}
				if h.DataOffset != wantOff || int64(len(b)) > h.DataOffset {
					t.Fatalf("data offset %d, header %d bytes", h.DataOffset, len(b))
				}
				p, err := Parse(b)
				if err != nil {
					t.Fatal(err)
				}
				if p.DataOffset != h.DataOffset || p.Version != v || p.KeySize != ks || p.UUID != h.UUID {
					t.Fatalf("parsed %+v", p)
				}
				dev := &memDevice{b: b}
				got, err := p.Unlock(ctx, dev, []byte("pass word"))
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, key) {
					t.Fatal("unlocked another key")
				}
				if _, err := p.Unlock(ctx, dev, []byte("pass worD")); !errors.Is(err, ErrWrongPassphrase) {
					t.Fatalf("wrong passphrase: %v", err)
				}
			})
		}
	}
}

// TestImageReadWrite writes plaintext at unaligned offsets and sizes
// through an encrypted view of a memory device and reads it back against
// a model; the header stays intact and the ciphertext is not plaintext.
func TestImageReadWrite(t *testing.T) {
	ctx := context.Background()
	for _, v := range []int{1, 2} {
		t.Run(fmt.Sprintf("luks%d", v), func(t *testing.T) {
			o := fastKDF(v)
			o.Alignment = 1 << 20
			dev := &memDevice{b: make([]byte, 20<<20)}
			fill(dev.b, 0x77) // what the image held before: the format wipes the header area
			fh, err := FormatImage(ctx, dev, []byte("pw"), o)
			if err != nil {
				t.Fatal(err)
			}
			if bytes.Contains(dev.b[:fh.DataOffset], bytes.Repeat([]byte{0x77}, 64)) {
				t.Fatal("old contents left in the header area")
			}
			clear(dev.b[fh.DataOffset:]) // a data area never written, for the model
			if _, err := Open(ctx, dev, []byte("pw"), 3-v); !errors.Is(err, ErrNotLUKS) {
				t.Fatalf("opening LUKS%d as LUKS%d: %v", v, 3-v, err)
			}
			writes := dev.nwr
			if _, err := Open(ctx, dev, []byte("wrong"), v); !errors.Is(err, ErrWrongPassphrase) {
				t.Fatalf("wrong passphrase: %v", err)
			}
			if dev.nwr != writes {
				t.Fatal("a failed open wrote")
			}
			img, err := Open(ctx, dev, []byte("pw"), 0)
			if err != nil {
				t.Fatal(err)
			}
			hdr := append([]byte(nil), dev.b[:img.Header().DataOffset]...)
			if img.Size() != dev.Size()-img.Header().DataOffset {
				t.Fatalf("size %d", img.Size())
			}
			model := make([]byte, img.Size())
			rng := rand.New(rand.NewPCG(1, uint64(v)))
			for i := range 200 {
				n := rng.IntN(3*4096) + 1
				if i%5 == 0 {
					n = (n/4096 + 1) * 4096 // whole sectors, encrypted straight from p
				}
				off := rng.Int64N(img.Size() - int64(n))
				if i%3 == 0 || i%5 == 0 {
					off = off &^ 4095
				}
				p := make([]byte, n)
				for j := range p {
					p[j] = byte(rng.Uint32())
				}
				sent := bytes.Clone(p)
				if _, err := img.WriteAtContext(ctx, p, off); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(p, sent) {
					t.Fatalf("write %d changed its buffer", i)
				}
				copy(model[off:], p)
				if i%7 == 0 {
					zo, zn := rng.Int64N(img.Size()-10000), rng.Int64N(10000)
					if err := img.WriteZeroes(ctx, zo, zn); err != nil {
						t.Fatal(err)
					}
					clear(model[zo : zo+zn])
				}
			}
			got := make([]byte, img.Size())
			if _, err := img.ReadAtContext(ctx, got, 0); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, model) {
				t.Fatal("read back differs from what was written")
			}
			// reads that begin or end inside a sector
			for i := range 100 {
				off := rng.Int64N(img.Size() - 1)
				n := rng.Int64N(min(3*4096, img.Size()-off)) + 1
				part := got[:n]
				if _, err := img.ReadAtContext(ctx, part, off); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(part, model[off:off+n]) {
					t.Fatalf("read %d of %d bytes at %d differs from what was written", i, n, off)
				}
			}
			// and they decrypt in pooled buffers: a 4K read's sectors
			// need one of 8K
			if a := testing.AllocsPerRun(100, func() { img.ReadAtContext(ctx, got[:4096], 100) }); a >= 1 {
				t.Errorf("a read within two sectors allocates %.1f times", a)
			}
			if !bytes.Equal(dev.b[:len(hdr)], hdr) {
				t.Fatal("the header area changed")
			}
			if bytes.Contains(dev.b, model[:64]) && !allZero(model[:64]) {
				t.Fatal("plaintext found on the device")
			}
			// reads past the end
			if n, err := img.ReadAtContext(ctx, make([]byte, 10), img.Size()-4); n != 4 || err != io.EOF {
				t.Fatalf("read across the end: %d, %v", n, err)
			}
			if _, err := img.WriteAtContext(ctx, make([]byte, 10), img.Size()-4); err == nil {
				t.Fatal("write across the end succeeded")
			}
		})
	}
}

// TestImageConcurrentEdges writes the 512-byte pieces of sectors from
// many goroutines at once: the read-merge-write of partial sectors must
// not lose any piece.
func TestImageConcurrentEdges(t *testing.T) {
	ctx := context.Background()
	dev := &memDevice{b: make([]byte, 18<<20)}
	if _, err := FormatImage(ctx, dev, []byte("pw"), fastKDF(2)); err != nil {
		t.Fatal(err)
	}
	img, err := Open(ctx, dev, []byte("pw"), 2)
	if err != nil {
		t.Fatal(err)
	}
	const pieces = 64
	var wg sync.WaitGroup
	for i := range pieces {
		wg.Go(func() {
			p := bytes.Repeat([]byte{byte(i + 1)}, 512)
			if _, err := img.WriteAtContext(ctx, p, int64(i)*512); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	got := make([]byte, pieces*512)
	if _, err := img.ReadAtContext(ctx, got, 0); err != nil {
		t.Fatal(err)
	}
	for i := range pieces {
		if got[i*512] != byte(i+1) || got[i*512+511] != byte(i+1) {
			t.Fatalf("piece %d lost", i)
		}
	}
}

// FuzzParse feeds Parse arbitrary bytes: no panic, bounded allocation.
func FuzzParse(f *testing.F) {
	o := fastKDF(2)
	b, _, _, err := Format([]byte("x"), o)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b[:luks2HeaderCopy])
	edits, err := SwapMagic(b)
	if err != nil {
		f.Fatal(err)
	}
	applyMagic(b, edits)
	f.Add(b[:luks2HeaderCopy]) // a clone's header (see magic.go)
	f.Fuzz(func(t *testing.T, b []byte) {
		var h *Header
		var err error
		alloctest.Check(t, len(b), func() { h, err = Parse(b) })
		if err == nil && (h.SectorSize <= 0 || len(h.Keyslots) == 0 && h.Version == 2) {
			t.Fatalf("parsed nonsense: %+v", h)
		}
	})
}

// memRBD is a memDevice with the RBD image abilities Discard uses:
// whole objects of 1 MiB, removed by Discard (recorded), and a parent
// when asked for.
type memRBD struct {
	memDevice
	parent    bool
	discarded [][2]int64
}

func (m *memRBD) Stat(context.Context) (rbd.Info, error) {
	return rbd.Info{ObjectSize: 1 << 20, StripeUnit: 1 << 20, StripeCount: 1}, nil
}

func (m *memRBD) Parent() (*rbd.ParentSpec, int64) {
	if m.parent {
		return &rbd.ParentSpec{ImageID: "p"}, 1 << 30
	}
	return nil, 0
}

func (m *memRBD) Discard(_ context.Context, off, length int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.discarded = append(m.discarded, [2]int64{off, length})
	clear(m.b[off : off+length])
	return nil
}

// TestDiscardWholeObjects: a discard removes the whole objects it covers
// (no parent), writes encrypted zeroes over the rest, and with a parent
// writes zeroes everywhere; the range reads as zeroes, its neighbours
// keep their data.
func TestDiscardWholeObjects(t *testing.T) {
	ctx := context.Background()
	for _, parent := range []bool{false, true} {
		// a clone that inherits its parent's header: formatted before it
		// had the parent
		dev := &memRBD{memDevice: memDevice{b: make([]byte, 24<<20)}}
		o := fastKDF(2)
		o.Alignment = 1 << 20
		if _, err := FormatImage(ctx, dev, []byte("pw"), o); err != nil {
			t.Fatal(err)
		}
		dev.discarded, dev.parent = nil, parent
		img, err := Open(ctx, dev, []byte("pw"), 2)
		if err != nil {
			t.Fatal(err)
		}
		data := bytes.Repeat([]byte{0x42}, 6<<20)
		if _, err := img.WriteAtContext(ctx, data, 0); err != nil {
			t.Fatal(err)
		}
		off, n := int64(1<<20-1000), int64(3<<20+5000) // objects 1 and 2 whole
		if err := img.Discard(ctx, off, n); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, 6<<20)
		if _, err := img.ReadAtContext(ctx, got, 0); err != nil {
			t.Fatal(err)
		}
		clear(data[off : off+n])
		if !bytes.Equal(got, data) {
			t.Fatalf("parent %v: read back wrong after discard", parent)
		}
		want := [][2]int64{{img.Header().DataOffset + 1<<20, 3 << 20}}
		if parent {
			want = nil
		}
		if fmt.Sprint(dev.discarded) != fmt.Sprint(want) {
			t.Fatalf("parent %v: discarded %v, want %v", parent, dev.discarded, want)
		}
	}
}

// TestFormatAndOpen: the image FormatAndOpen returns is the one Open
// makes of the header it wrote (same header fields, data written through
// one read back through the other), for both versions.
func TestFormatAndOpen(t *testing.T) {
	ctx := context.Background()
	for _, v := range []int{1, 2} {
		t.Run(fmt.Sprintf("luks%d", v), func(t *testing.T) {
			o := fastKDF(v)
			o.Alignment = 1 << 20
			dev := &memDevice{b: make([]byte, 24<<20)}
			formatted, err := FormatAndOpen(ctx, dev, []byte("pw"), o)
			if err != nil {
				t.Fatal(err)
			}
			opened, err := Open(ctx, dev, []byte("pw"), v)
			if err != nil {
				t.Fatal(err)
			}
			f, g := formatted.Header(), opened.Header()
			if f.Version != g.Version || f.DataOffset != g.DataOffset || f.SectorSize != g.SectorSize || f.IVTweak != g.IVTweak || f.Clone != g.Clone {
				t.Fatalf("formatted %+v, opened %+v", f, g)
			}
			want := make([]byte, 3*4096)
			for i := range want {
				want[i] = byte(i*7 + v)
			}
			if _, err := formatted.WriteAtContext(ctx, want, 4096+512); err != nil {
				t.Fatal(err)
			}
			got := make([]byte, len(want))
			if _, err := opened.ReadAtContext(ctx, got, 4096+512); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatal("data written through FormatAndOpen's image reads differently through Open's")
			}
		})
	}
}

// TestFormatAndOpenClone: on a clone FormatAndOpen writes a standalone
// header (the LUKS magic, not a clone's), which Open opens alone.
func TestFormatAndOpenClone(t *testing.T) {
	ctx := context.Background()
	dev := &memRBD{memDevice: memDevice{b: make([]byte, 24<<20)}, parent: true}
	if _, err := FormatAndOpen(ctx, dev, []byte("pw"), fastKDF(2)); err != nil {
		t.Fatal(err)
	}
	if string(dev.b[:6]) != "LUKS\xba\xbe" {
		t.Fatalf("magic %q on a clone FormatAndOpen formatted, want LUKS's", dev.b[:6])
	}
	if _, err := Open(ctx, dev, []byte("pw"), 2); err != nil {
		t.Fatal(err)
	}
}
