package luks

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"testing"
)

// TestSwapMagic: a header with the clone magic parses as the header it
// was made from, with Clone set, and swapping back restores every byte;
// LUKS2's secondary header carries the magic reversed.
func TestSwapMagic(t *testing.T) {
	for _, v := range []int{1, 2} {
		b, want, _, err := Format([]byte("pw"), fastKDF(v))
		if err != nil {
			t.Fatal(err)
		}
		orig := bytes.Clone(b)
		edits, err := SwapMagic(b)
		if err != nil {
			t.Fatal(err)
		}
		if len(edits) != v {
			t.Fatalf("LUKS%d: %d edits", v, len(edits))
		}
		applyMagic(b, edits)
		if !bytes.HasPrefix(b, []byte("RBDL\xba\xbe")) {
			t.Fatalf("LUKS%d: magic %q", v, b[:6])
		}
		if v == 2 && !bytes.Equal(b[luks2HeaderCopy:luks2HeaderCopy+6], []byte("LDBR\xba\xbe")) {
			t.Fatalf("secondary magic %q", b[luks2HeaderCopy:luks2HeaderCopy+6])
		}
		h, err := Parse(b)
		if err != nil {
			t.Fatalf("LUKS%d clone header: %v", v, err)
		}
		if !h.Clone || h.UUID != want.UUID || h.DataOffset != want.DataOffset || h.SectorSize != want.SectorSize {
			t.Fatalf("LUKS%d clone header parsed as %+v", v, h)
		}
		if !bytes.Equal(b[:6], cloneMagic) {
			t.Fatal("Parse changed its input")
		}
		back, err := SwapMagic(b)
		if err != nil {
			t.Fatal(err)
		}
		applyMagic(b, back)
		if !bytes.Equal(b, orig) {
			t.Fatalf("LUKS%d: swapping back did not restore the header", v)
		}
	}
	b, _, _, _ := Format([]byte("pw"), fastKDF(2))
	copy(b[luks2HeaderCopy:], "XXXX")
	if _, err := SwapMagic(b); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("mismatched secondary magic: %v", err)
	}
	if _, err := SwapMagic(make([]byte, 4096)); !errors.Is(err, ErrNotLUKS) {
		t.Fatalf("zeroes: %v", err)
	}
}

// TestParentView: a clone's view of its parent's data is the parent's
// plaintext at the same plaintext offset, under the clone's key, for
// every pair of sector sizes and for a plaintext parent; the parent's
// holes stay holes and the clone's header area reads the parent's raw
// bytes.
func TestParentView(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct{ parent, child int }{{2, 1}, {1, 2}, {2, 2}, {0, 1}, {0, 2}} {
		t.Run(fmt.Sprintf("parent%d-child%d", c.parent, c.child), func(t *testing.T) {
			pdev := &memDevice{b: make([]byte, 24<<20)}
			var pimg interface {
				WriteAtContext(ctx context.Context, p []byte, off int64) (int, error)
				ReadAtContext(ctx context.Context, p []byte, off int64) (int, error)
				Size() int64
			} = pdev
			v := &parentView{parent: pdev, sector: 512}
			if c.parent != 0 {
				o := fastKDF(c.parent)
				if _, err := FormatImage(ctx, pdev, []byte("parent"), o); err != nil {
					t.Fatal(err)
				}
				clear(pdev.b[16<<20:])
				img, err := Open(ctx, pdev, []byte("parent"), c.parent)
				if err != nil {
					t.Fatal(err)
				}
				pimg, v.cipher, v.offset, v.sector = img, img.cipher, img.hdr.DataOffset, img.hdr.SectorSize
			}
			rng := bytes.Repeat([]byte("0123456789abcdef"), 1<<10)
			for _, w := range [][2]int64{{0, 4096}, {5000, 300}, {1 << 20, 8192}, {3<<20 - 100, 200}} {
				if _, err := pimg.WriteAtContext(ctx, rng[:w[1]], w[0]); err != nil {
					t.Fatal(err)
				}
			}
			_, ch, key, err := Format([]byte("child"), fastKDF(c.child))
			if err != nil {
				t.Fatal(err)
			}
			v.child, _ = newSectorCipher(key, ch.SectorSize, 0)
			v.childOffset = ch.DataOffset
			// the whole parent plaintext through the view, then pieces
			const span = 4 << 20
			raw := make([]byte, span)
			if err := v.read(ctx, raw, v.childOffset); err != nil {
				t.Fatal(err)
			}
			want := make([]byte, span)
			if _, err := pimg.ReadAtContext(ctx, want, 0); err != nil {
				t.Fatal(err)
			}
			got := bytes.Clone(raw)
			ss := ch.SectorSize
			for i := 0; i < span; i += ss {
				if !allZero(raw[i : i+ss]) {
					v.child.decrypt(got[i:i+ss], got[i:i+ss], int64(i))
				}
			}
			if !bytes.Equal(got, want) {
				t.Fatal("the clone's view differs from the parent's plaintext")
			}
			if c.parent != 0 && !allZero(raw[2<<20:3<<20-4096]) {
				t.Fatal("a hole of the parent was written in the clone's view")
			}
			piece := make([]byte, 10000)
			if err := v.read(ctx, piece, v.childOffset+777); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(piece, raw[777:777+10000]) {
				t.Fatal("an unaligned read differs from the aligned one")
			}
			head := make([]byte, 100)
			if err := v.read(ctx, head, 10); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(head, pdev.b[10:110]) {
				t.Fatal("the clone's header area is not the parent's raw bytes")
			}
		})
	}
}

// TestFormatClone: a clone's header is written with the clone magic,
// padded to the alignment, and nothing else of the image is written;
// Open refuses it (it needs its parent's encryption), and OpenLayers on
// an image without a parent refuses a clone's header.
func TestFormatClone(t *testing.T) {
	ctx := context.Background()
	for _, v := range []int{1, 2} {
		dev := &memRBD{memDevice: memDevice{b: make([]byte, 24<<20)}, parent: true}
		fill(dev.b, 0x77) // the parent's data, read through
		o := fastKDF(v)
		o.Alignment = 1 << 20
		h, err := FormatImage(ctx, dev, []byte("pw"), o)
		if err != nil {
			t.Fatal(err)
		}
		if !h.Clone || !bytes.HasPrefix(dev.b, cloneMagic) {
			t.Fatalf("LUKS%d: magic %q", v, dev.b[:6])
		}
		if dev.nwr != 1 || len(dev.discarded) != 0 {
			t.Fatalf("LUKS%d: %d writes, %d discards", v, dev.nwr, len(dev.discarded))
		}
		if dev.b[1<<20-1] != 0 || dev.b[1<<20] != 0x77 {
			t.Fatalf("LUKS%d: the header was not padded to the alignment alone", v)
		}
		if _, err := Open(ctx, dev, []byte("pw"), v); !errors.Is(err, ErrUnsupported) {
			t.Fatalf("Open of a clone's header: %v", err)
		}
		_, err = OpenLayers(ctx, &dev.memDevice, []Spec{{Version: v, Passphrase: []byte("pw")}})
		var le *LayerError
		if !errors.As(err, &le) || le.Layer != 0 || !errors.Is(err, ErrCorrupt) {
			t.Fatalf("OpenLayers of a clone's header without a parent: %v", err)
		}
		_, err = OpenLayers(ctx, &dev.memDevice, []Spec{{Passphrase: []byte("pw")}, {Passphrase: []byte("pw")}})
		if !errors.Is(err, ErrSpecCount) {
			t.Fatalf("two specs for one layer: %v", err)
		}
	}
}

// TestLayerErrorNames: the error names the layer, never the passphrase.
func TestLayerErrorNames(t *testing.T) {
	err := &LayerError{Layer: 1, Image: "base", Assumed: true, Err: ErrWrongPassphrase}
	msg := err.Error()
	if !errors.Is(err, ErrWrongPassphrase) || !bytes.Contains([]byte(msg), []byte(strconv.Quote("base"))) {
		t.Fatal(msg)
	}
}

// FuzzSwapMagic: the magic swap reads bytes from an image.
func FuzzSwapMagic(f *testing.F) {
	for _, v := range []int{1, 2} {
		b, _, _, err := Format([]byte("x"), fastKDF(v))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b[:min(len(b), 2*luks2HeaderCopy)])
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		edits, err := SwapMagic(b)
		if err != nil {
			return
		}
		c := bytes.Clone(b)
		applyMagic(c, edits)
		back, err := SwapMagic(c)
		if err != nil {
			t.Fatalf("swapped header refused: %v", err)
		}
		applyMagic(c, back)
		if !bytes.Equal(c, b) {
			t.Fatal("swapping twice changed the header")
		}
	})
}

// TestCloneSeeds: the fuzz corpus holds the clone headers of the real
// tool's seeds.
func TestCloneSeeds(t *testing.T) {
	for _, name := range []string{"rbd-luks1", "rbd-luks2"} {
		b := readSeed(t, "testdata/fuzz/FuzzParse/"+name+"-clone")
		h, err := Parse(b)
		if err != nil || !h.Clone {
			t.Fatalf("%s-clone: %v", name, err)
		}
		if _, err := os.Stat("testdata/fuzz/FuzzParse/" + name); err != nil {
			t.Fatal(err)
		}
	}
}
