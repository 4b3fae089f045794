package auth

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/purerbd/purerbd/internal/shorttier"
	"github.com/purerbd/purerbd/rados/denc"
)

// testKey returns a deterministic AES key for offline tests.
func testKey(seed byte) CryptoKey {
	s := make([]byte, 16)
	for i := range s {
		s[i] = seed + byte(i)
	}
	return NewCryptoKey(KeyTypeAES, denc.UTime{Sec: 1600000000, Nsec: 5}, s)
}

func keyBase64(k CryptoKey) string {
	return base64.StdEncoding.EncodeToString(denc.Marshal(k))
}

func TestParseKeyRoundTrip(t *testing.T) {
	k := testKey(7)
	got, err := ParseKey("  " + keyBase64(k) + "\n")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Secret(), k.Secret()) || got.Created != k.Created || got.Type != KeyTypeAES {
		t.Fatalf("parsed %v, want %v", got, k)
	}
}

func TestParseKeyErrorsHideTheKey(t *testing.T) {
	k := testKey(9)
	b := denc.Marshal(k)
	cases := map[string]string{
		"not base64": "!!!" + keyBase64(k),
		"truncated":  base64.StdEncoding.EncodeToString(b[:len(b)-1]),
		"trailing":   base64.StdEncoding.EncodeToString(append(b, 0)),
		"wrong type": base64.StdEncoding.EncodeToString(denc.Marshal(NewCryptoKey(2, denc.UTime{}, k.Secret()))),
		"short key":  base64.StdEncoding.EncodeToString(denc.Marshal(NewCryptoKey(1, denc.UTime{}, k.Secret()[:8]))),
	}
	for name, in := range cases {
		_, err := ParseKey(in)
		if err == nil {
			t.Errorf("%s: no error", name)
			continue
		}
		if strings.Contains(err.Error(), in) || strings.Contains(err.Error(), keyBase64(k)) {
			t.Errorf("%s: error reveals the key: %v", name, err)
		}
	}
}

func TestCryptoKeyFormatsRedacted(t *testing.T) {
	k := testKey(1)
	for _, s := range []string{fmt.Sprint(k), fmt.Sprintf("%v %+v %#v %s", k, k, k, k)} {
		if strings.Contains(s, string(k.Secret())) || strings.Contains(s, fmt.Sprint(k.Secret())) ||
			strings.Contains(s, fmt.Sprintf("%x", k.Secret())) {
			t.Fatalf("formatting reveals the secret: %s", s)
		}
	}
}

func TestParseName(t *testing.T) {
	for in, want := range map[string]string{
		"client.admin": "client.admin",
		"admin":        "client.admin",
		"osd.0":        "osd.0",
		"rbd.user":     "client.rbd.user",
		"mgr.x":        "mgr.x",
	} {
		n, err := ParseName(in)
		if err != nil {
			t.Fatalf("%q: %v", in, err)
		}
		if n.String() != want {
			t.Errorf("%q: got %s, want %s", in, n, want)
		}
	}
	if _, err := ParseName(""); err == nil {
		t.Error("empty name accepted")
	}
}

// TestCephAuthtoolKeyring parses keys and keyrings written by Ceph's own
// ceph-authtool.
func TestCephAuthtoolKeyring(t *testing.T) {
	shorttier.Skip(t, "ceph-authtool")
	tool, err := exec.LookPath("ceph-authtool")
	if err != nil {
		t.Fatalf("ceph-authtool not found (install ceph-common): %v", err)
	}
	out, err := exec.Command(tool, "--gen-print-key").Output()
	if err != nil {
		t.Fatalf("ceph-authtool --gen-print-key: %v", err)
	}
	if _, err := ParseKey(string(out)); err != nil {
		t.Fatalf("parsing ceph-authtool key: %v", err)
	}
	path := filepath.Join(t.TempDir(), "keyring")
	for _, args := range [][]string{
		{"--create-keyring", path, "--gen-key", "-n", "client.foo", "--cap", "mon", "allow r", "--cap", "osd", "allow rw pool=rbd"},
		{path, "--gen-key", "-n", "osd.3"},
	} {
		if b, err := exec.Command(tool, args...).CombinedOutput(); err != nil {
			t.Fatalf("ceph-authtool %v: %v\n%s", args, err, b)
		}
	}
	kr, err := ReadKeyring(path)
	if err != nil {
		t.Fatal(err)
	}
	foo, _ := ParseName("client.foo")
	osd, _ := ParseName("osd.3")
	for _, n := range []denc.AuthName{foo, osd} {
		k, err := kr.Key(n)
		if err != nil {
			t.Fatal(err)
		}
		// ceph-authtool prints the same key: compare.
		out, err := exec.Command(tool, path, "-n", n.String(), "-p").Output()
		if err != nil {
			t.Fatalf("ceph-authtool -p: %v", err)
		}
		want, err := ParseKey(string(out))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(k.Secret(), want.Secret()) {
			t.Errorf("%s: key differs from ceph-authtool -p", n)
		}
	}
	for _, e := range kr.Entries {
		if e.Name == foo {
			if got := e.Caps["osd"]; got != "allow rw pool=rbd" {
				t.Errorf("caps osd = %q", got)
			}
		}
	}
	if _, err := kr.Key(denc.AuthName{Type: denc.EntityTypeClient, ID: "nobody"}); err == nil {
		t.Error("missing entity found")
	}
}

func TestParseKeyringErrors(t *testing.T) {
	good := keyBase64(testKey(3))
	for name, in := range map[string]string{
		"no section":   "key = " + good + "\n",
		"bad header":   "[client.admin\nkey = " + good + "\n",
		"bad key":      "[client.admin]\nkey = AAAA\n",
		"no separator": "[client.admin]\nkey\n",
	} {
		if _, err := ParseKeyring(strings.NewReader(in)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	kr, err := ParseKeyring(strings.NewReader("# comment\n; other\n[client.admin]\n\tkey = " + good + "\n\tauid = 0\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kr.Key(denc.AuthName{Type: denc.EntityTypeClient, ID: "admin"}); err != nil {
		t.Fatal(err)
	}
}

func TestReadKeyFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(path, []byte(keyBase64(testKey(4))+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadKeyFile(path); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadKeyFile(path + ".missing"); err == nil || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
}

func TestEnvelopeRoundTrip(t *testing.T) {
	k := testKey(5)
	for n := 0; n < 40; n++ {
		payload := bytes.Repeat([]byte{byte(n)}, n)
		blob, err := sealBlob(k, 0, func(e *denc.Encoder) { e.Raw(payload) })
		if err != nil {
			t.Fatal(err)
		}
		d, err := openBlob(k, 0, denc.NewDecoder(blob), "x")
		if err != nil {
			t.Fatal(err)
		}
		if got := d.Rest(); !bytes.Equal(got, payload) {
			t.Fatalf("n=%d: got %x", n, got)
		}
		if _, err := openBlob(testKey(6), 0, denc.NewDecoder(blob), "x"); err == nil {
			t.Fatalf("n=%d: opened with the wrong key", n)
		}
	}
}
