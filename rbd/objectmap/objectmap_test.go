package objectmap

import (
	"bytes"
	"testing"

	"github.com/purerbd/purerbd/internal/alloctest"
	"github.com/purerbd/purerbd/rados/radostest/corpus"
)

func TestCorpus(t *testing.T) {
	for _, s := range corpus.Samples(t, "BitVector_2") {
		bv, err := Unmarshal(s.Data)
		if err != nil {
			t.Errorf("%s/%s: %v", s.Version, s.Name, err)
			continue
		}
		if out := bv.Marshal(); !bytes.Equal(out, s.Data) {
			t.Errorf("%s/%s: re-encoded differently\n got % x\nwant % x", s.Version, s.Name, out, s.Data)
		}
	}
}

func TestGetSetResize(t *testing.T) {
	b := New(10)
	if len(b.Bytes()) != 3 {
		t.Fatalf("10 elements in %d bytes", len(b.Bytes()))
	}
	b.Set(0, Exists)
	b.Set(5, ExistsClean)
	b.Set(9, Pending)
	if b.Bytes()[0] != 0x40 || b.Bytes()[1] != 0x30 || b.Bytes()[2] != 0x20 {
		t.Errorf("packing: % x", b.Bytes())
	}
	if b.Get(0) != Exists || b.Get(5) != ExistsClean || b.Get(9) != Pending || b.Get(1) != Nonexistent || b.Get(100) != 0 {
		t.Error("get")
	}
	b.Resize(6)
	b.Resize(12)
	if b.Get(9) != 0 || b.Get(5) != ExistsClean {
		t.Errorf("resize kept stale state: % x", b.Bytes())
	}
	// many blocks: CRCs over 4096-byte blocks
	big := New(4*BlockSize*2 + 7)
	for i := uint64(0); i < big.Len(); i += 3 {
		big.Set(i, uint8(i%4))
	}
	got, err := Unmarshal(big.Marshal())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Bytes(), big.Bytes()) || got.Len() != big.Len() {
		t.Error("big round trip")
	}
	enc := big.Marshal()
	enc[20] ^= 1
	if _, err := Unmarshal(enc); err == nil {
		t.Error("corrupted data accepted")
	}
	nc := big.Clone()
	nc.NoCRC = true
	got, err = Unmarshal(nc.Marshal())
	if err != nil || !got.NoCRC || got.Len() != big.Len() {
		t.Errorf("no-crc round trip: %v", err)
	}
}

func FuzzBitVector(f *testing.F) {
	f.Add(New(17).Marshal())
	f.Fuzz(func(t *testing.T, b []byte) {
		var bv *BitVector
		var err error
		alloctest.Check(t, len(b), func() { bv, err = Unmarshal(b) })
		if err != nil {
			return
		}
		once := bv.Marshal()
		bv2, err := Unmarshal(once)
		if err != nil {
			t.Fatalf("re-encoding does not decode: %v", err)
		}
		if !bytes.Equal(bv2.Marshal(), once) {
			t.Fatal("unstable")
		}
	})
}
