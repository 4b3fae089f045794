package rados

import (
	"testing"

	"github.com/purerbd/purerbd/internal/alloctest"
	"github.com/purerbd/purerbd/rados/denc"
)

// encodePoolOpReply encodes an MPoolOpReply as a monitor does (seeds).
func encodePoolOpReply(code int32, epoch uint32, data []byte) []byte {
	e := denc.NewEncoder(nil)
	e.U64(uint64(epoch))
	e.I16(-1)
	e.U64(0)
	denc.UUID{1, 2, 3}.Encode(e)
	e.I32(code)
	e.U32(epoch)
	e.Bool(data != nil)
	if data != nil {
		e.Blob(data)
	}
	return e.Bytes()
}

func FuzzPoolOpReply(f *testing.F) {
	f.Add(encodePoolOpReply(0, 42, []byte{3, 0, 0, 0, 0, 0, 0, 0}))
	f.Add(encodePoolOpReply(-2, 42, nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		var r poolOpReply
		var err error
		alloctest.Check(t, len(b), func() { r, err = decodePoolOpReply(b) })
		if err != nil {
			return
		}
		back, err := decodePoolOpReply(encodePoolOpReply(r.code, r.epoch, r.data))
		if err != nil || back.code != r.code || back.epoch != r.epoch || string(back.data) != string(r.data) {
			t.Fatalf("round trip: %+v -> %+v, %v", r, back, err)
		}
	})
}
