package auth

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/purerbd/purerbd/rados/denc"
)

// corpusDir finds shared/ceph-object-corpus next to the module root, or
// PURERBD_CORPUS. Tests may skip only when it is absent outside CI.
func corpusDir(t testing.TB) string {
	t.Helper()
	if d := os.Getenv("PURERBD_CORPUS"); d != "" {
		return d
	}
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("module root (go.mod) not found")
		}
		dir = parent
	}
	c := filepath.Join(dir, "..", "shared", "ceph-object-corpus")
	if _, err := os.Stat(c); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("ceph-object-corpus missing at %s (CI is set)", c)
		}
		t.Skipf("ceph-object-corpus not found at %s", c)
	}
	return c
}

// corpusSamples returns every sample file of typ across all versions.
func corpusSamples(t testing.TB, typ string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(corpusDir(t), "*", typ, "*"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatalf("no corpus samples of %s", typ)
	}
	return files
}

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
			files := corpusSamples(t, typ)
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
		for _, f := range corpusSamples(t, typ) {
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
