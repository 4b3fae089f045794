package auth

import (
	"bytes"
	"os"
	"testing"

	"github.com/purerbd/purerbd/rados/denc"
	"github.com/purerbd/purerbd/rados/radostest/corpus"
)

type codec interface {
	Decode(d *denc.Decoder)
	Encode(e *denc.Encoder)
}

// corpusTypes maps corpus type names to fresh values of our types.
var corpusTypes = map[string]func() codec{
	"AuthTicket":                func() codec { return &AuthTicket{} },
	"CephXAuthenticate":         func() codec { return &CephXAuthenticate{} },
	"CephXAuthorize":            func() codec { return &CephXAuthorize{} },
	"CephXAuthorizeChallenge":   func() codec { return &CephXAuthorizeChallenge{} },
	"CephXAuthorizeReply":       func() codec { return &CephXAuthorizeReply{} },
	"CephXChallengeBlob":        func() codec { return &CephXChallengeBlob{} },
	"CephXRequestHeader":        func() codec { return &CephXRequestHeader{} },
	"CephXResponseHeader":       func() codec { return &CephXResponseHeader{} },
	"CephXServerChallenge":      func() codec { return &CephXServerChallenge{} },
	"CephXServiceTicket":        func() codec { return &CephXServiceTicket{} },
	"CephXServiceTicketInfo":    func() codec { return &CephXServiceTicketInfo{} },
	"CephXServiceTicketRequest": func() codec { return &CephXServiceTicketRequest{} },
	"CephXTicketBlob":           func() codec { return &CephXTicketBlob{} },
	"CryptoKey":                 func() codec { return &CryptoKey{} },
}

// TestCorpus decodes every sample of every cephx type Ceph 16.2 to 20.3
// wrote, checks nothing is left over, and re-encodes it byte for byte.
func TestCorpus(t *testing.T) {
	for typ, mk := range corpusTypes {
		t.Run(typ, func(t *testing.T) {
			files := corpus.Files(t, typ)
			for _, f := range files {
				b, err := os.ReadFile(f)
				if err != nil {
					t.Fatal(err)
				}
				v := mk()
				d := denc.NewDecoder(b)
				v.Decode(d)
				d.End(typ)
				if err := d.Err(); err != nil {
					t.Errorf("%s: %v", f, err)
					continue
				}
				e := denc.NewEncoder(nil)
				v.Encode(e)
				if !bytes.Equal(e.Bytes(), b) {
					t.Errorf("%s: re-encoding differs:\n got %x\nwant %x", f, e.Bytes(), b)
				}
			}
			t.Logf("%d samples", len(files))
		})
	}
}

// TestCorpusTruncated checks every prefix of every sample fails cleanly.
func TestCorpusTruncated(t *testing.T) {
	for typ, mk := range corpusTypes {
		for _, f := range corpus.Files(t, typ) {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			for n := 0; n < len(b); n++ {
				v := mk()
				d := denc.NewDecoder(b[:n])
				v.Decode(d)
				d.End(typ)
				if d.Err() == nil {
					t.Errorf("%s: %d-byte prefix of %d decoded without error", f, n, len(b))
				}
			}
		}
	}
}
