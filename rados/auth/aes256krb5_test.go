package auth

import (
	"bytes"
	"crypto/aes"
	"encoding/hex"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/purerbd/purerbd/rados/denc"
)

func unhex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// testKey256 returns a deterministic aes256k key for offline tests.
func testKey256(seed byte) CryptoKey {
	s := make([]byte, aes256kKeyLen)
	for i := range s {
		s[i] = seed + byte(i)
	}
	return NewCryptoKey(KeyTypeAES256K, denc.UTime{Sec: 1700000000, Nsec: 7}, s)
}

// The key derivation of RFC 8009 (appendix A, aes256-cts-hmac-sha384-192,
// key usage 2).
func TestAES256KDeriveRFC8009(t *testing.T) {
	base := unhex(t, "6d404d37faf79f9df0d33568d320669800eb4836472ea8a026d16b7182460c52")
	if got, want := aes256kDerive(base, 2, 0xAA, 32), unhex(t, "56ab22bee63d82d7bc5227f6773f8ea7a5eb1c825160c38312980c442e5c7e49"); !bytes.Equal(got, want) {
		t.Errorf("Ke = %x, want %x", got, want)
	}
	if got, want := aes256kDerive(base, 2, 0x55, 24), unhex(t, "69b16514e3cd8e56b82010d5c73012b622c4d00ffc23ed1f"); !bytes.Equal(got, want) {
		t.Errorf("Ki = %x, want %x", got, want)
	}
}

// Ciphertext stealing (CS3, the Kerberos variant) against RFC 3962's
// AES-128 vectors: CTS is independent of the AES key size.
func TestCTSRFC3962(t *testing.T) {
	block, err := aes.NewCipher([]byte("chicken teriyaki"))
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []struct{ in, out string }{
		{"4920776f756c64206c696b652074686520", "c6353568f2bf8cb4d8a580362da7ff7f97"},
		{"4920776f756c64206c696b65207468652047656e6572616c20476175277320", "fc00783e0efdb2c1d445d4c8eff7ed2297687268d6ecccc0c07b25e25ecfe5"},
		{"4920776f756c64206c696b65207468652047656e6572616c2047617527732043", "39312523a78662d5be7fcbcc98ebf5a897687268d6ecccc0c07b25e25ecfe584"},
	} {
		buf := unhex(t, v.in)
		ctsEncrypt(block, buf)
		if got := hex.EncodeToString(buf); got != v.out {
			t.Errorf("encrypt %s = %s, want %s", v.in, got, v.out)
		}
		ctsDecrypt(block, buf)
		if got := hex.EncodeToString(buf); got != v.in {
			t.Errorf("decrypt back = %s, want %s", got, v.in)
		}
	}
}

func TestAES256KRoundTrip(t *testing.T) {
	k := testKey256(3)
	for n := 0; n <= 80; n++ {
		pt := bytes.Repeat([]byte{byte(n)}, n)
		ct, err := k.encrypt(usageTicketSessionKey, pt)
		if err != nil {
			t.Fatal(err)
		}
		if len(ct) != n+aes256kOverhead {
			t.Fatalf("%d bytes encrypt to %d", n, len(ct))
		}
		back, err := k.decrypt(usageTicketSessionKey, ct)
		if err != nil || !bytes.Equal(back, pt) {
			t.Fatalf("%d bytes: %x, %v", n, back, err)
		}
		// The usage keys the ciphertext: another usage must not open it.
		if _, err := k.decrypt(usageAuthorize, ct); !errors.Is(err, errDecrypt) {
			t.Fatalf("%d bytes opened under another usage: %v", n, err)
		}
		// Any flipped bit fails the MAC.
		bad := append([]byte(nil), ct...)
		bad[n%len(bad)] ^= 1
		if _, err := k.decrypt(usageTicketSessionKey, bad); !errors.Is(err, errDecrypt) {
			t.Fatalf("%d bytes: tampered ciphertext accepted: %v", n, err)
		}
	}
	if _, err := k.decrypt(0, make([]byte, aes256kOverhead-1)); err == nil {
		t.Fatal("short ciphertext accepted")
	}
}

// Two encryptions of the same plaintext differ (the random confounder),
// which is why the challenge proof of an aes256k key is an HMAC instead.
func TestAES256KChallengeProof(t *testing.T) {
	k := testKey256(9)
	a, _ := k.encrypt(0, []byte("same"))
	b, _ := k.encrypt(0, []byte("same"))
	if bytes.Equal(a, b) {
		t.Fatal("aes256k encryption is deterministic")
	}
	p1, err := challengeProof(k, 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	p2, _ := challengeProof(k, 1, 2)
	if p1 != p2 {
		t.Fatal("challenge proof not deterministic")
	}
	e := denc.NewEncoder(nil)
	CephXChallengeBlob{ServerChallenge: 1, ClientChallenge: 2}.Encode(e)
	mac := hmacSHA256(k, e.Bytes())
	var want uint64
	for i := 0; i < 32; i += 8 {
		want ^= uint64(mac[i]) | uint64(mac[i+1])<<8 | uint64(mac[i+2])<<16 | uint64(mac[i+3])<<24 |
			uint64(mac[i+4])<<32 | uint64(mac[i+5])<<40 | uint64(mac[i+6])<<48 | uint64(mac[i+7])<<56
	}
	if p1 != want {
		t.Fatalf("proof %#x, want %#x", p1, want)
	}
}

func TestParseKeyAES256K(t *testing.T) {
	k := testKey256(5)
	got, err := ParseKey(keyBase64(k))
	if err != nil {
		t.Fatal(err)
	}
	if got.Type != KeyTypeAES256K || !bytes.Equal(got.Secret(), k.Secret()) {
		t.Fatalf("parsed %v", got)
	}
	short := NewCryptoKey(KeyTypeAES256K, denc.UTime{}, make([]byte, 16))
	if _, err := ParseKey(keyBase64(short)); err == nil {
		t.Fatal("16-byte aes256k key accepted")
	}
}

// Keys made by Tentacle's own ceph-authtool (--gen-print-key and
// --create-keyring --gen-key; throwaway test keys): aes256k CryptoKeys
// as Ceph 20.2 encodes them, which must decode, validate and re-encode
// byte for byte. The encoding corpus (up to 20.3.0-4314) holds no
// CryptoKey of type 2, so these are the Ceph-made samples of it.
func TestTentacleMadeKeys(t *testing.T) {
	b, err := os.ReadFile("testdata/tentacle/keys.txt")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Fields(string(b))
	if len(lines) == 0 {
		t.Fatal("no keys")
	}
	kr, err := ReadKeyring("testdata/tentacle/client.tentacle.keyring")
	if err != nil {
		t.Fatal(err)
	}
	k, err := kr.Key(mustName(t, "client.tentacle"))
	if err != nil {
		t.Fatal(err)
	}
	lines = append(lines, keyBase64(k))
	for _, s := range lines {
		k, err := ParseKey(s)
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		if k.Type != KeyTypeAES256K || len(k.Secret()) != aes256kKeyLen {
			t.Fatalf("%s: %v", s, k)
		}
		if got := keyBase64(k); got != s {
			t.Fatalf("re-encoded %s as %s", s, got)
		}
		ct, err := k.encrypt(usageTicketSessionKey, []byte("x"))
		if err != nil {
			t.Fatal(err)
		}
		if pt, err := k.decrypt(usageTicketSessionKey, ct); err != nil || string(pt) != "x" {
			t.Fatalf("round trip: %q %v", pt, err)
		}
	}
}
