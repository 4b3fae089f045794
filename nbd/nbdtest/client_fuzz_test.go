package nbdtest

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/purerbd/purerbd/internal/alloctest"
)

// fuzzClient is a client with five requests pending (cookies 1 to 5) and
// no connection: replies are decoded straight from a byte slice.
func fuzzClient(structured bool) *Client {
	c := &Client{pending: make(map[uint64]*call), Structured: structured, HasMeta: structured, MetaContextID: 1}
	for i, cl := range []*call{
		{typ: CmdRead, off: 4096, length: 64, buf: make([]byte, 64)},
		{typ: CmdWrite, off: 0, length: 512},
		{typ: CmdBlockStatus, off: 0, length: 1 << 20},
		{typ: CmdRead, off: 0, length: 0, buf: nil},
		{typ: CmdTrim, off: 0, length: 1 << 20},
	} {
		cl.done = make(chan struct{})
		c.pending[uint64(i+1)] = cl
	}
	return c
}

// FuzzClientReplies decodes fuzzed reply streams: every malformed one must
// end in an error, never a panic or a read outside the request's buffer.
func FuzzClientReplies(f *testing.F) {
	for _, s := range clientReplySeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) == 0 {
			return
		}
		alloctest.Check(t, len(in), func() {
			c := fuzzClient(in[0]&1 == 1)
			br := bufio.NewReaderSize(bytes.NewReader(in[1:]), 16)
			for i := 0; i < 64; i++ {
				if err := c.readReply(br); err != nil {
					return
				}
			}
		})
	})
}

func simpleReply(errno uint32, cookie uint64, data []byte) []byte {
	b := binary.BigEndian.AppendUint32(nil, MagicSimple)
	b = binary.BigEndian.AppendUint32(b, errno)
	b = binary.BigEndian.AppendUint64(b, cookie)
	return append(b, data...)
}

func chunk(flags, typ uint16, cookie uint64, payload []byte) []byte {
	b := binary.BigEndian.AppendUint32(nil, MagicStructured)
	b = binary.BigEndian.AppendUint16(b, flags)
	b = binary.BigEndian.AppendUint16(b, typ)
	b = binary.BigEndian.AppendUint64(b, cookie)
	b = binary.BigEndian.AppendUint32(b, uint32(len(payload)))
	return append(b, payload...)
}

func clientReplySeeds() [][]byte {
	be64 := func(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }
	cat := func(first byte, parts ...[]byte) []byte { return append([]byte{first}, bytes.Join(parts, nil)...) }
	return [][]byte{
		cat(0, simpleReply(0, 1, make([]byte, 64)), simpleReply(0, 2, nil), simpleReply(22, 5, nil)),
		cat(1,
			chunk(0, ReplyTypeOffsetData, 1, append(be64(4096), make([]byte, 32)...)),
			chunk(ReplyFlagDone, ReplyTypeOffsetHole, 1, append(be64(4128), 0, 0, 0, 32)),
			chunk(ReplyFlagDone, ReplyTypeBlockStatus, 3, []byte{0, 0, 0, 1, 0, 0, 16, 0, 0, 0, 0, 3}),
			chunk(ReplyFlagDone, ReplyTypeNone, 4, nil),
			chunk(ReplyFlagDone, ReplyTypeError, 2, []byte{0, 0, 0, 5, 0, 2, 'n', 'o'}),
			simpleReply(0, 5, nil)),
		cat(1, chunk(ReplyFlagDone, ReplyTypeOffsetData, 1, append(be64(4150), 1, 2, 3))),
	}
}

// TestWriteClientFuzzSeeds rewrites the committed seeds when
// NBD_WRITE_FUZZ_SEEDS=1 and checks that they are there.
func TestWriteClientFuzzSeeds(t *testing.T) {
	dir := filepath.Join("testdata", "fuzz", "FuzzClientReplies")
	seeds := clientReplySeeds()
	if os.Getenv("NBD_WRITE_FUZZ_SEEDS") == "1" {
		os.MkdirAll(dir, 0o755)
		for i, s := range seeds {
			body := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", s)
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("seed-%02d", i)), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	if files, _ := filepath.Glob(filepath.Join(dir, "*")); len(files) < len(seeds) {
		t.Errorf("%s: %d committed seeds, want %d (run with NBD_WRITE_FUZZ_SEEDS=1)", dir, len(files), len(seeds))
	}
}
