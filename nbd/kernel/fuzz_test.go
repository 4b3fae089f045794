package kernel

import (
	"bytes"
	"testing"

	"github.com/ulikunitz/xz"

	"github.com/purerbd/purerbd/internal/alloctest"
	"github.com/purerbd/purerbd/nbd/kernel/internal/genl"
)

// FuzzParseStatusReply feeds STATUS answers, as datagrams, to the device
// list decoder.
func FuzzParseStatusReply(f *testing.F) {
	f.Add(unhex(f, cap61Status))
	f.Add(unhex(f, cap61Status+cap61StatusAck))
	f.Fuzz(func(t *testing.T, b []byte) {
		var l []DeviceStatus
		var err error
		alloctest.Check(t, len(b), func() {
			var msgs []genl.Message
			if msgs, err = genl.ParseMessages(b); err == nil {
				l, err = parseStatusReply(msgs)
			}
		})
		if err != nil {
			return
		}
		for _, d := range l {
			if d.Index < 0 {
				t.Fatalf("negative index decoded: %+v", d)
			}
		}
	})
}

// FuzzParseConnectReply feeds CONNECT answers to the index decoder.
func FuzzParseConnectReply(f *testing.F) {
	f.Add(unhex(f, cap61ConnectRep))
	f.Add(unhex(f, cap61ConnectRep+cap61ConnectAck))
	f.Fuzz(func(t *testing.T, b []byte) {
		var i int
		var err error
		alloctest.Check(t, len(b), func() {
			var msgs []genl.Message
			if msgs, err = genl.ParseMessages(b); err == nil {
				i, err = parseConnectReply(msgs)
			}
		})
		if err == nil && i < 0 {
			t.Fatalf("negative index %d", i)
		}
	})
}

// FuzzParseLinkDead feeds multicast datagrams to the LINK_DEAD decoder.
func FuzzParseLinkDead(f *testing.F) {
	f.Add(unhex(f, cap61LinkDead1))
	f.Add(unhex(f, cap61Status))
	f.Fuzz(func(t *testing.T, b []byte) {
		var l []int
		var err error
		alloctest.Check(t, len(b), func() {
			var msgs []genl.Message
			if msgs, err = genl.ParseMessages(b); err == nil {
				l, err = parseLinkDead(msgs)
			}
		})
		if err != nil {
			return
		}
		for _, i := range l {
			if i < 0 {
				t.Fatalf("negative index %d", i)
			}
		}
	})
}

// FuzzDecompressXZModule feeds xz files to the layout check that runs
// before the xz decoder (xzCheck), then, for what passes small, to the
// decoder itself (a big dictionary or output only slows the fuzzer down:
// the decoder is fuzzed by its authors). The seeds are xz's own output
// with the kernel's options (testdata) and ulikunitz/xz's.
func FuzzDecompressXZModule(f *testing.F) {
	small := moduleImage()[:512]
	for _, code := range []byte{16, 20, 40} {
		b := compress(f, compressionXZ, moduleImage())
		f.Add(b)
		h := b[xzHeaderSize:]
		if i := bytes.Index(h[:(int(h[0])+1)*4], []byte{xzFilterLZMA2, 1}); i > 0 {
			h[i+2] = code
			f.Add(b)
		}
	}
	var buf bytes.Buffer
	w, err := xz.WriterConfig{CheckSum: xz.CRC32, DictCap: 4096}.NewWriter(&buf)
	if err != nil {
		f.Fatal(err)
	}
	w.Write(small)
	if err := w.Close(); err != nil {
		f.Fatal(err)
	}
	f.Add(buf.Bytes())
	f.Fuzz(func(t *testing.T, b []byte) {
		var total, dict int64
		var err error
		alloctest.Check(t, len(b), func() { total, dict, err = xzCheck(b, maxModuleSize) })
		if err != nil {
			return
		}
		if total < 0 || total > maxModuleSize || dict < 0 || dict > maxModuleSize {
			t.Fatalf("xzCheck passed total %d, dictionary %d", total, dict)
		}
		if dict > 64<<10 || total > 4<<10 {
			return
		}
		out, err := decompressModule(b, compressionXZ, maxModuleSize)
		if err == nil && int64(len(out)) != total {
			t.Fatalf("decompressed %d bytes, the index says %d", len(out), total)
		}
	})
}
