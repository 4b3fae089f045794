package chaostest

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/purerbd/purerbd/nbd"
	"github.com/purerbd/purerbd/nbd/nbdtest"
	"github.com/purerbd/purerbd/nbd/rbdnbd"
	"github.com/purerbd/purerbd/rados"
	"github.com/purerbd/purerbd/rados/auth"
	"github.com/purerbd/purerbd/rados/cephconf"
	"github.com/purerbd/purerbd/rados/monc"
	"github.com/purerbd/purerbd/rados/radostest"
	"github.com/purerbd/purerbd/rbd"
)

// secretForms returns every spelling of a cephx key that must never show
// up in a log or an error: the keyring's base64, the encoded CryptoKey and
// its bare 16-byte secret as raw bytes, quoted, hex, base64 and as Go
// prints a byte slice.
func secretForms(t testing.TB, b64 string) map[string][]byte {
	t.Helper()
	k, err := auth.ParseKey(b64)
	if err != nil {
		t.Fatal(err)
	}
	blob, _ := base64.StdEncoding.DecodeString(b64)
	sec := k.Secret()
	forms := map[string][]byte{
		"keyring base64":           []byte(b64),
		"encoded key, raw bytes":   blob,
		"secret, raw bytes":        sec,
		"secret, quoted":           []byte(strings.Trim(strconv.Quote(string(sec)), `"`)),
		"secret, hex":              []byte(hex.EncodeToString(sec)),
		"secret, HEX":              []byte(strings.ToUpper(hex.EncodeToString(sec))),
		"encoded key, hex":         []byte(hex.EncodeToString(blob)),
		"secret, base64":           []byte(base64.StdEncoding.EncodeToString(sec)),
		"secret, raw base64":       []byte(base64.RawStdEncoding.EncodeToString(sec)),
		"secret, url base64":       []byte(base64.RawURLEncoding.EncodeToString(sec)),
		"secret, Go byte slice":    []byte(strings.Trim(fmt.Sprint(sec), "[]")),
		"secret, Go byte slice %x": []byte(fmt.Sprintf("% x", sec)),
	}
	// the base64 without its padding, in case something trims it
	forms["keyring base64, unpadded"] = []byte(strings.TrimRight(b64, "="))
	return forms
}

// leakScanner is an io.Writer for log handlers that looks for secrets in
// everything written to it, without keeping the (large) log.
type leakScanner struct {
	forms map[string][]byte
	mu    sync.Mutex
	bytes int64
	lines int64
	hits  []string
}

func newLeakScanner(forms map[string][]byte) *leakScanner { return &leakScanner{forms: forms} }

func (s *leakScanner) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.bytes += int64(len(p))
	s.lines += int64(bytes.Count(p, []byte("\n")))
	for what, f := range s.forms {
		if i := bytes.Index(p, f); i >= 0 && len(s.hits) < 20 {
			// say where, not what
			s.hits = append(s.hits, fmt.Sprintf("%s in a log record of %d bytes, at byte %d", what, len(p), i))
		}
	}
	return len(p), nil
}

func (s *leakScanner) check(t testing.TB) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, h := range s.hits {
		t.Errorf("secret in the log: %s", h)
	}
}

// fanout sends every record to several handlers: the text handler formats
// values with fmt, the JSON one with encoding/json (base64 for []byte):
// both ways of leaking are covered.
type fanout []slog.Handler

func (f fanout) Enabled(ctx context.Context, l slog.Level) bool { return true }
func (f fanout) Handle(ctx context.Context, r slog.Record) error {
	for _, h := range f {
		if err := h.Handle(ctx, r.Clone()); err != nil {
			return err
		}
	}
	return nil
}
func (f fanout) WithAttrs(attrs []slog.Attr) slog.Handler {
	out := make(fanout, len(f))
	for i, h := range f {
		out[i] = h.WithAttrs(attrs)
	}
	return out
}
func (f fanout) WithGroup(name string) slog.Handler {
	out := make(fanout, len(f))
	for i, h := range f {
		out[i] = h.WithGroup(name)
	}
	return out
}

// debugLogger logs everything at debug level, as text and as JSON, to w.
func debugLogger(w *leakScanner) *slog.Logger {
	o := &slog.HandlerOptions{Level: slog.LevelDebug, AddSource: true}
	return slog.New(fanout{slog.NewTextHandler(w, o), slog.NewJSONHandler(w, o)})
}

// TestSecretsStaySecret checks on a real cluster that the admin key never
// appears in a log at debug level or in the error of a failed
// authentication.
func TestSecretsStaySecret(t *testing.T) {
	c := radostest.New(t, radostest.Options{})
	t.Run("logs", func(t *testing.T) { testKeysNeverLogged(t, c) })
	t.Run("auth failures", func(t *testing.T) { testAuthFailuresHideKeys(t, c) })
}

// testKeysNeverLogged runs a client through everything that touches the
// key — cephx with the mons, service tickets, authorizers for OSDs, a
// ticket renewal, a monitor connection cut and hunted again, RBD I/O with
// the exclusive lock, an NBD export — with every logger at debug level,
// and looks for the admin key in every spelling in the output.
func testKeysNeverLogged(t *testing.T, c *radostest.Cluster) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	scan := newLeakScanner(secretForms(t, c.AdminKey))
	log := debugLogger(scan)
	// code that logs to the default logger instead of the configured one
	// is caught too
	defer slog.SetDefault(slog.Default())
	slog.SetDefault(log)

	conn, err := rados.Connect(ctx, rados.Config{MonHost: c.MonHost(), Key: c.AdminKey, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ioc, err := conn.IOContext(ctx, c.Pool, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := ioc.WriteFull(ctx, "secrets-test", []byte("hello")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := conn.MonCommand(ctx, []byte(`{"prefix": "osd pool ls", "format": "json"}`)); err != nil {
		t.Fatal(err)
	}
	// the monitor session is cut: the client hunts and authenticates again
	var mons []netip.AddrPort
	for _, a := range c.MonAddrs {
		mons = append(mons, netip.MustParseAddrPort(a))
	}
	if n, err := cutSockets(mons); err != nil || n == 0 {
		t.Fatalf("cutting the mon session: %d cut, %v", n, err)
	}
	if _, _, err := conn.MonCommand(ctx, []byte(`{"prefix": "osd pool ls", "format": "json"}`)); err != nil {
		t.Fatal(err)
	}

	// RBD with the exclusive lock, served over NBD
	if err := rbd.Create(ctx, ioc, "secrets", 8<<20, rbd.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	img, err := rbd.Open(ctx, ioc, "secrets", rbd.OpenOptions{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	backend := rbdnbd.New(img)
	srv, err := nbd.NewServer(nbd.Config{Exports: []*nbd.Export{{Name: "x", Backend: backend}}, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(t.TempDir(), "nbd.sock")
	l, err := nbd.ListenUnix(sock, 0)
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ctx, l)
	cl, err := nbdtest.Dial(ctx, "unix", sock, nbdtest.Options{Export: "x", Structured: true})
	if err != nil {
		t.Fatal(err)
	}
	buf := bytes.Repeat([]byte{7}, 64<<10)
	if err := cl.WriteAt(ctx, buf, 1<<20, 0); err != nil {
		t.Fatal(err)
	}
	if err := cl.ReadAt(ctx, buf, 1<<20); err != nil {
		t.Fatal(err)
	}
	cl.Close()
	srv.Close()
	if err := img.Close(); err != nil {
		t.Fatal(err)
	}

	// a monitor client of its own for a ticket renewal
	key, _ := auth.ParseKey(c.AdminKey)
	mc, err := monc.New(ctx, monc.Config{MonAddrs: c.MonAddrs, Key: key, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	if err := mc.RenewTickets(ctx); err != nil {
		t.Errorf("renewing tickets: %v", err)
	}
	mc.Close()

	// the same through ceph.conf and --key, as the CLI connects
	conn2, err := rados.ConnectFromConf(ctx, cephconf.Args{Conf: c.Conf, Key: c.AdminKey})
	if err != nil {
		t.Fatal(err)
	}
	conn2.Close()

	scan.check(t)
	if scan.lines < 20 {
		t.Fatalf("only %d log lines (%d bytes) at debug level: the test saw too little to be meaningful", scan.lines, scan.bytes)
	}
	t.Logf("%d log lines (%d bytes) at debug level, no key in them", scan.lines, scan.bytes)
}

// testAuthFailuresHideKeys checks the errors of every way authentication
// can fail for the key's owner: neither the key given nor the right one
// may appear in the error or the log.
func testAuthFailuresHideKeys(t *testing.T, c *radostest.Cluster) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	right := c.AdminKey
	blob, _ := base64.StdEncoding.DecodeString(right)
	wrongBlob := append([]byte(nil), blob...)
	for i := len(wrongBlob) - 16; i < len(wrongBlob); i++ {
		wrongBlob[i] ^= 0x5a
	}
	wrong := base64.StdEncoding.EncodeToString(wrongBlob)
	forms := secretForms(t, right)
	for what, f := range secretForms(t, wrong) {
		forms["wrong key: "+what] = f
	}
	scan := newLeakScanner(forms)
	log := debugLogger(scan)
	defer slog.SetDefault(slog.Default())
	slog.SetDefault(log) // ConnectFromConf logs there

	dir := t.TempDir()
	otherKeyring := filepath.Join(dir, "other.keyring")
	if err := os.WriteFile(otherKeyring, []byte("[client.someone]\n\tkey = "+wrong+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	brokenKeyring := filepath.Join(dir, "broken.keyring")
	if err := os.WriteFile(brokenKeyring, []byte("[client.admin]\n\tkey = "+right[:20]+"%%"+right[22:]+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(dir, "wrong.key")
	if err := os.WriteFile(keyFile, []byte(wrong+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	short := context.WithoutCancel(ctx)
	for _, tc := range []struct {
		name    string
		connect func(ctx context.Context) (*rados.Conn, error)
	}{
		{"wrong key", func(ctx context.Context) (*rados.Conn, error) {
			return rados.Connect(ctx, rados.Config{MonHost: c.MonHost(), Key: wrong, Logger: log, ConnectTimeout: 15 * time.Second})
		}},
		{"unknown entity", func(ctx context.Context) (*rados.Conn, error) {
			return rados.Connect(ctx, rados.Config{MonHost: c.MonHost(), Name: "client.nobody", Key: right, Logger: log, ConnectTimeout: 15 * time.Second})
		}},
		{"malformed key", func(ctx context.Context) (*rados.Conn, error) {
			return rados.Connect(ctx, rados.Config{MonHost: c.MonHost(), Key: right[:20] + "%%" + right[22:], Logger: log})
		}},
		{"truncated key", func(ctx context.Context) (*rados.Conn, error) {
			return rados.Connect(ctx, rados.Config{MonHost: c.MonHost(), Key: right[:len(right)-8], Logger: log})
		}},
		{"keyring without the entity", func(ctx context.Context) (*rados.Conn, error) {
			return rados.Connect(ctx, rados.Config{MonHost: c.MonHost(), Keyring: otherKeyring, Logger: log})
		}},
		{"keyring with a broken key", func(ctx context.Context) (*rados.Conn, error) {
			return rados.Connect(ctx, rados.Config{MonHost: c.MonHost(), Keyring: brokenKeyring, Logger: log})
		}},
		{"conf and wrong --key", func(ctx context.Context) (*rados.Conn, error) {
			return rados.ConnectFromConf(ctx, cephconf.Args{Conf: c.Conf, Key: wrong})
		}},
		{"conf and wrong --keyfile", func(ctx context.Context) (*rados.Conn, error) {
			return rados.ConnectFromConf(ctx, cephconf.Args{Conf: c.Conf, KeyFile: keyFile})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(short, 30*time.Second)
			defer cancel()
			conn, err := tc.connect(ctx)
			if err == nil {
				conn.Close()
				t.Fatal("connected")
			}
			msg := err.Error()
			t.Logf("error: %s", msg)
			for what, f := range forms {
				if bytes.Contains([]byte(msg), f) {
					t.Errorf("the error holds the %s", what)
				}
			}
		})
	}
	scan.check(t)
}

// TestKeyFormatsRedacted checks that a key printed or logged by accident,
// alone or inside the monitor client's Config, stays secret.
func TestKeyFormatsRedacted(t *testing.T) {
	const b64 = "AQBY7r5jAAAAABAA8+I6xOzbWg3kGGCfAoIPbQ=="
	k, err := auth.ParseKey(b64)
	if err != nil {
		t.Fatal(err)
	}
	scan := newLeakScanner(secretForms(t, b64))
	log := debugLogger(scan)
	cfg := monc.Config{MonAddrs: []string{"127.0.0.1:3300"}, Key: k}
	for _, f := range []string{"%v", "%+v", "%#v", "%s", "%x", "%X", "%q"} {
		fmt.Fprintf(scan, f+"\n", k)
		fmt.Fprintf(scan, f+"\n", cfg)
		fmt.Fprintf(scan, f+"\n", &cfg)
	}
	log.Debug("key", "key", k, "config", cfg, "ptr", &cfg)
	log.Debug("any", slog.Any("key", k), slog.Any("config", cfg))
	scan.check(t)
}
