package monc

import (
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/purerbd/purerbd/internal/alloctest"
)

// addCaptures seeds f with the captured fronts whose names match glob.
func addCaptures(f *testing.F, glob string, add func(b []byte)) {
	files, _ := filepath.Glob(filepath.Join(capturesDir, glob))
	for _, p := range files {
		if filepath.Ext(p) == ".data" {
			continue
		}
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		add(b)
		add(b[:len(b)/2])
	}
}

func FuzzCommandAck(f *testing.F) {
	addCaptures(f, "MMonCommandAck-*", func(b []byte) { f.Add(b) })
	f.Fuzz(func(t *testing.T, b []byte) {
		var a commandAck
		var err error
		alloctest.Check(t, len(b), func() { a, err = decodeCommandAck(b) })
		if err == nil && len(a.rs) > len(b) {
			t.Fatalf("status of %d bytes from %d bytes of input", len(a.rs), len(b))
		}
	})
}

func FuzzSubscribeAck(f *testing.F) {
	f.Add([]byte{10, 0, 0, 0})
	f.Add(make([]byte, 20))
	f.Add(make([]byte, 19))
	f.Fuzz(func(t *testing.T, b []byte) {
		alloctest.Check(t, len(b), func() { _, _ = decodeSubscribeAck(b) })
	})
}

func FuzzAuthReply(f *testing.F) {
	addCaptures(f, "MAuthReply-*", func(b []byte) { f.Add(b) })
	f.Fuzz(func(t *testing.T, b []byte) {
		var r authReply
		var err error
		alloctest.Check(t, len(b), func() { r, err = decodeAuthReply(b) })
		if err == nil && len(r.payload)+len(r.msg) > len(b) {
			t.Fatal("decoded more than the input holds")
		}
	})
}

func FuzzMonMapMessage(f *testing.F) {
	addCaptures(f, "MMonMap*", func(b []byte) { f.Add(b) })
	f.Fuzz(func(t *testing.T, b []byte) {
		var m *MonMap
		var err error
		alloctest.Check(t, len(b), func() { m, err = decodeMonMapMessage(b) })
		if err == nil {
			_ = m.String()
		}
	})
}

func FuzzVersionReply(f *testing.F) {
	addCaptures(f, "MMonGetVersionReply*", func(b []byte) { f.Add(uint16(2), b); f.Add(uint16(1), b) })
	f.Fuzz(func(t *testing.T, version uint16, b []byte) {
		alloctest.Check(t, len(b)+2, func() { _, _ = decodeVersionReply(b, version) })
	})
}

func FuzzOSDMapEpochs(f *testing.F) {
	addCaptures(f, "MOSDMap-*", func(b []byte) { f.Add(uint16(4), b) })
	f.Fuzz(func(t *testing.T, version uint16, b []byte) {
		var ep osdMapEpochs
		var err error
		alloctest.Check(t, len(b)+2, func() { ep, err = decodeOSDMapEpochs(b, version) })
		if err != nil {
			return
		}
		if ep.incFirst > ep.incLast || ep.fullFirst > ep.fullLast ||
			len(ep.full) > 0 && (ep.full[0] != ep.fullFirst || ep.full[len(ep.full)-1] != ep.fullLast) {
			t.Fatalf("inconsistent epochs %+v", ep)
		}
		if !sort.SliceIsSorted(ep.full, func(i, j int) bool { return ep.full[i] < ep.full[j] }) {
			t.Fatalf("full epochs out of order: %v", ep.full)
		}
		if len(ep.full)*8 > len(b) {
			t.Fatalf("%d epochs from %d bytes", len(ep.full), len(b))
		}
	})
}

func FuzzConfig(f *testing.F) {
	addCaptures(f, "MConfig*", func(b []byte) { f.Add(b) })
	f.Fuzz(func(t *testing.T, b []byte) {
		var m map[string]string
		var err error
		alloctest.Check(t, len(b), func() { m, err = decodeConfigMessage(b) })
		if err == nil && len(m)*8 > len(b) {
			t.Fatalf("%d options from %d bytes", len(m), len(b))
		}
	})
}
