package osdc

import (
	"bytes"
	"os"
	"reflect"
	"testing"

	"github.com/purerbd/purerbd/internal/alloctest"
	"github.com/purerbd/purerbd/rados/denc"
	"github.com/purerbd/purerbd/rados/radostest/corpus"
)

// TestSnapSetCorpus decodes every obj_list_snap_response_t Ceph 16.2 to
// 20.3 wrote and re-encodes it byte for byte.
func TestSnapSetCorpus(t *testing.T) {
	files := corpus.Files(t, "obj_list_snap_response_t")
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var s SnapSet
		d := denc.NewDecoder(b)
		s.Decode(d)
		d.End("obj_list_snap_response_t")
		if err := d.Err(); err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		e := denc.NewEncoder(nil)
		s.Encode(e)
		if !bytes.Equal(e.Bytes(), b) {
			t.Errorf("%s: re-encoding differs:\n got %x\nwant %x", f, e.Bytes(), b)
		}
	}
	if len(files) == 0 {
		t.Fatal("no samples")
	}
}

func TestSnapSetVersion1(t *testing.T) {
	// version 1 has no seq: it reads as SnapHead
	e := denc.NewEncoder(nil)
	e.Versioned(1, 1, func(e *denc.Encoder) { e.U32(0) })
	s, err := ParseSnapSet(e.Bytes())
	if err != nil || s.Seq != SnapHead || len(s.Clones) != 0 {
		t.Fatalf("%+v %v", s, err)
	}
}

func FuzzSnapSet(f *testing.F) {
	s := SnapSet{Seq: 5, Clones: []Clone{
		{CloneID: 3, Snaps: []uint64{2, 3}, Overlap: []Extent{{0, 4096}, {8192, 100}}, Size: 9000},
		{CloneID: SnapHead, Size: 4 << 20},
	}}
	e := denc.NewEncoder(nil)
	s.Encode(e)
	f.Add(e.Bytes())
	f.Fuzz(func(t *testing.T, b []byte) {
		var s SnapSet
		var err error
		alloctest.Check(t, len(b), func() { s, err = ParseSnapSet(b) })
		if err != nil {
			return
		}
		e := denc.NewEncoder(nil)
		s.Encode(e)
		s2, err := ParseSnapSet(e.Bytes())
		if err != nil || !reflect.DeepEqual(s, s2) {
			t.Fatalf("round trip: %+v -> %+v, %v", s, s2, err)
		}
	})
}
