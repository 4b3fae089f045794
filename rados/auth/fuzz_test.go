package auth

import (
	"bytes"
	"crypto/aes"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/purerbd/purerbd/internal/alloctest"
	"github.com/purerbd/purerbd/rados/denc"
	"github.com/purerbd/purerbd/rados/radostest/corpus"
)

// Fuzz targets for everything auth decodes from the network. Their seed
// corpora under testdata/fuzz come from Ceph's encodings (the object
// corpus) and from deterministic exchanges; regenerate them with
// PURERBD_WRITE_FUZZ_SEEDS=1 go test -run TestWriteFuzzSeeds.

// corpusTypeNames lists corpusTypes in a fixed order, so a fuzz input's
// first byte selects a type stably.
func corpusTypeNames() []string {
	names := make([]string, 0, len(corpusTypes))
	for n := range corpusTypes {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// FuzzCephXTypes decodes any cephx structure; what decodes must re-encode
// to something that decodes the same way.
func FuzzCephXTypes(f *testing.F) {
	names := corpusTypeNames()
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) == 0 {
			return
		}
		mk := corpusTypes[names[int(b[0])%len(names)]]
		v := mk()
		d := denc.NewDecoder(b[1:])
		alloctest.Check(t, len(b), func() {
			v, d = mk(), denc.NewDecoder(b[1:])
			v.Decode(d)
		})
		if d.Err() != nil {
			return
		}
		enc := denc.NewEncoder(nil)
		v.Encode(enc)
		w := mk()
		d2 := denc.NewDecoder(enc.Bytes())
		w.Decode(d2)
		d2.End("re-encoded")
		if d2.Err() != nil {
			t.Fatalf("re-encoding does not decode: %v", d2.Err())
		}
	})
}

// fuzzCephX returns a client that has answered a challenge, ready for
// AUTH_DONE, with key testKey(1).
func fuzzCephX(t testing.TB) (*CephX, Handler) {
	cx, err := NewCephX(denc.AuthName{Type: denc.EntityTypeClient, ID: "admin"}, testKey(1), 0)
	if err != nil {
		t.Fatal(err)
	}
	h, _ := cx.NewHandler(denc.EntityTypeMon)
	if _, err := h.Request(); err != nil {
		t.Fatal(err)
	}
	if _, err := h.More(denc.Marshal(CephXServerChallenge{ServerChallenge: 1})); err != nil {
		t.Fatal(err)
	}
	return cx, h
}

// FuzzMonAuthDone feeds arbitrary AUTH_DONE payloads (cephx replies with
// tickets, connection secret and service tickets) to a monitor handler.
func FuzzMonAuthDone(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		alloctest.Check(t, len(b), func() {
			_, h := fuzzCephX(t)
			_, _ = h.Done(1, b)
		})
	})
}

// FuzzServerChallenge feeds arbitrary AUTH_REPLY_MORE payloads to a
// monitor handler.
func FuzzServerChallenge(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		cx, _ := NewCephX(denc.AuthName{Type: denc.EntityTypeClient, ID: "admin"}, testKey(1), 0)
		h, _ := cx.NewHandler(denc.EntityTypeMon)
		if _, err := h.Request(); err != nil {
			t.Fatal(err)
		}
		alloctest.Check(t, len(b), func() { _, _ = h.More(b) })
	})
}

// fuzzAuthenticated returns a client holding tickets from the fake server.
func fuzzAuthenticated(t *testing.T) (*CephX, *fakeCephxServer) {
	name := denc.AuthName{Type: denc.EntityTypeClient, ID: "admin"}
	cx, _ := NewCephX(name, testKey(1), 0)
	srv := newFakeCephxServer(t, name, testKey(1))
	h, _ := cx.NewHandler(denc.EntityTypeMon)
	gid, reply, err := srv.monAuth(h)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.Done(gid, reply); err != nil {
		t.Fatal(err)
	}
	return cx, srv
}

// FuzzRenewalReply feeds arbitrary MAuth reply payloads to an
// authenticated client.
func FuzzRenewalReply(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		cx, _ := fuzzAuthenticated(t)
		alloctest.Check(t, len(b), func() { _ = cx.HandleRenewalReply(b) })
	})
}

// FuzzAuthorizerReply feeds arbitrary challenges and replies to an OSD
// authorizer. The first byte picks the frame: odd = AUTH_REPLY_MORE.
func FuzzAuthorizerReply(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) == 0 {
			return
		}
		cx, _ := fuzzAuthenticated(t)
		h, _ := cx.NewHandler(denc.EntityTypeOSD)
		if _, err := h.Request(); err != nil {
			t.Fatal(err)
		}
		alloctest.Check(t, len(b), func() {
			if b[0]&1 == 1 {
				_, _ = h.More(b[1:])
			} else {
				_, _ = h.Done(0, b[1:])
			}
		})
	})
}

// TestWriteFuzzSeeds regenerates the committed seed corpora.
func TestWriteFuzzSeeds(t *testing.T) {
	if os.Getenv("PURERBD_WRITE_FUZZ_SEEDS") == "" {
		t.Skip("set PURERBD_WRITE_FUZZ_SEEDS=1 to regenerate testdata/fuzz")
	}
	write := func(target, name string, b []byte) {
		dir := filepath.Join("testdata", "fuzz", target)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		s := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", b)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// Corpus samples: one per type and version.
	names := corpusTypeNames()
	for i, typ := range names {
		for _, f := range corpus.Files(t, typ) {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			ver := filepath.Base(filepath.Dir(filepath.Dir(f)))
			write("FuzzCephXTypes", fmt.Sprintf("%s-%s", typ, ver), append([]byte{byte(i)}, b...))
		}
	}
	for _, f := range corpus.Files(t, "CephXServerChallenge") {
		b, _ := os.ReadFile(f)
		write("FuzzServerChallenge", filepath.Base(f), b)
	}
	// A full monitor reply.
	name := denc.AuthName{Type: denc.EntityTypeClient, ID: "admin"}
	cx, _ := NewCephX(name, testKey(1), 0)
	srv := newFakeCephxServer(t, name, testKey(1))
	h, _ := cx.NewHandler(denc.EntityTypeMon)
	gid, reply, err := srv.monAuth(h)
	if err != nil {
		t.Fatal(err)
	}
	write("FuzzMonAuthDone", "reply", reply)
	write("FuzzMonAuthDone", "truncated", reply[:len(reply)/2])
	if _, err := h.Done(gid, reply); err != nil {
		t.Fatal(err)
	}
	// Reclaim reply (ticket blob sealed with the old session key).
	h2, _ := cx.NewHandler(denc.EntityTypeMon)
	_, reply2, err := srv.monAuth(h2)
	if err != nil {
		t.Fatal(err)
	}
	write("FuzzRenewalReply", "auth-reclaim", reply2)
	// Principal reply.
	e := denc.NewEncoder(nil)
	CephXResponseHeader{RequestType: cephxGetPrincipalSessionKey}.Encode(e)
	auth := cx.tickets[denc.EntityTypeAuth]
	srv.ticketReply(e, auth.sessionKey, []denc.EntityType{denc.EntityTypeOSD, denc.EntityTypeMgr}, gid, map[denc.EntityType]CryptoKey{}, nil)
	write("FuzzRenewalReply", "principal", e.Bytes())
	// Authorizer challenge and reply.
	oh, _ := cx.NewHandler(denc.EntityTypeOSD)
	req, _ := oh.Request()
	info, au, err := srv.readAuthorizer(denc.EntityTypeOSD, req)
	if err != nil {
		t.Fatal(err)
	}
	ch, _ := seal(info.SessionKey, usageAuthorizeChallenge, CephXAuthorizeChallenge{ServerChallenge: 9}.Encode)
	write("FuzzAuthorizerReply", "challenge", append([]byte{1}, ch...))
	rep, _ := sealBlob(info.SessionKey, usageAuthorizeReply, CephXAuthorizeReply{NoncePlusOne: au.Nonce + 1, ConnectionSecret: srv.connSecret}.Encode)
	write("FuzzAuthorizerReply", "reply", append([]byte{0}, rep...))
	// aes256k envelopes: a valid one, and a truncated one.
	sealed, err := seal(testKey256(1), usageAuthorizeReply, CephXAuthorizeReply{NoncePlusOne: 2, ConnectionSecret: srv.connSecret}.Encode)
	if err != nil {
		t.Fatal(err)
	}
	write("FuzzAES256K", "reply", sealed)
	write("FuzzAES256K", "truncated", sealed[:len(sealed)-1])
	write("FuzzAES256K", "one-block", sealed[:aes.BlockSize])
}

// FuzzAES256K feeds arbitrary ciphertexts to an aes256k envelope (the MAC
// must refuse them without panicking), runs the CTS decryption itself on
// them (which the MAC otherwise keeps random input away from), and checks
// that any plaintext survives a round trip.
func FuzzAES256K(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		k := testKey256(1)
		alloctest.Check(t, len(b), func() { _, _ = open(k, usageAuthorizeReply, b) })
		if len(b) >= aes.BlockSize {
			block, err := aes.NewCipher(aes256kDerive(k.Secret(), usageAuthorizeReply, 0xAA, 32))
			if err != nil {
				t.Fatal(err)
			}
			buf := append([]byte(nil), b...)
			ctsDecrypt(block, buf)
			ctsEncrypt(block, buf)
			if !bytes.Equal(buf, b) {
				t.Fatalf("CTS decrypt then encrypt changed %x into %x", b, buf)
			}
		}
		ct, err := aes256kEncryptWith(k, usageAuthorizeReply, make([]byte, aes.BlockSize), b)
		if err != nil {
			t.Fatal(err)
		}
		pt, err := aes256kDecrypt(k, usageAuthorizeReply, ct)
		if err != nil || !bytes.Equal(pt, b) {
			t.Fatalf("round trip of %x: %x, %v", b, pt, err)
		}
	})
}
