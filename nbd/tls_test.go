package nbd_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/purerbd/purerbd/nbd"
	"github.com/purerbd/purerbd/nbd/nbdtest"
)

// testPKI is a CA and a server certificate signed by it, also written as
// PEM files in dir under the names libnbd looks for (ca-cert.pem).
type testPKI struct {
	dir    string
	server tls.Certificate
	pool   *x509.CertPool
	caCert *x509.Certificate
	caKey  *ecdsa.PrivateKey
}

func newTestPKI(t *testing.T) *testPKI {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "purerbd test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	p := &testPKI{dir: t.TempDir(), caCert: caCert, caKey: caKey}
	p.server = p.issue(t, "localhost", x509.ExtKeyUsageServerAuth)
	writePEM(t, filepath.Join(p.dir, "ca-cert.pem"), "CERTIFICATE", caDER)
	p.pool = x509.NewCertPool()
	p.pool.AddCert(caCert)
	return p
}

// issue makes a certificate for name signed by the CA.
func (p *testPKI) issue(t *testing.T, name string, usage x509.ExtKeyUsage) tls.Certificate {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: name},
		DNSNames:     []string{name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.caCert, &key.PublicKey, p.caKey)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// writeCert writes c and its key as PEM files.
func writeCert(t *testing.T, c tls.Certificate, certPath, keyPath string) {
	t.Helper()
	writePEM(t, certPath, "CERTIFICATE", c.Certificate[0])
	der, err := x509.MarshalPKCS8PrivateKey(c.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	writePEM(t, keyPath, "PRIVATE KEY", der)
}

func writePEM(t *testing.T, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

func (p *testPKI) serverConfig() *tls.Config {
	return &tls.Config{Certificates: []tls.Certificate{p.server}, MinVersion: tls.VersionTLS12}
}

func (p *testPKI) clientConfig() *tls.Config {
	return &tls.Config{RootCAs: p.pool, ServerName: "localhost", MinVersion: tls.VersionTLS12}
}

func TestTLSRequired(t *testing.T) {
	pki := newTestPKI(t)
	m, _ := nbd.NewMemory(1 << 20)
	srv := nbdtest.Start(t, nbd.Config{
		Exports:    []*nbd.Export{{Name: "e", Backend: m}},
		TLSConfig:  pki.serverConfig(),
		RequireTLS: true,
	})

	// Before TLS everything but STARTTLS and ABORT is refused.
	r := dialRaw(t, srv)
	r.greet(nbdtest.FlagFixedNewstyle)
	r.expectOpt(nbdtest.OptList, nil, nbdtest.RepErrTLSReqd)
	r.expectOpt(nbdtest.OptGo, nbdtest.InfoData("e"), nbdtest.RepErrTLSReqd)
	r.expectOpt(99, nil, nbdtest.RepErrTLSReqd)
	r.expectOpt(nbdtest.OptStartTLS, []byte{0}, nbdtest.RepErrInvalid)
	r.expectOpt(nbdtest.OptStartTLS, nil, nbdtest.RepAck)
	tc := tls.Client(r.c, pki.clientConfig())
	if err := tc.Handshake(); err != nil {
		t.Fatal(err)
	}
	r.c, r.br = tc, bufio.NewReader(tc)
	r.expectOpt(nbdtest.OptStartTLS, nil, nbdtest.RepErrInvalid)
	r.expectOpt(nbdtest.OptList, nil, nbdtest.RepAck)
	r.goExport("e")
	r.send(nbdtest.Request(0, nbdtest.CmdFlush, 3, 0, 0, nil))
	if e, c := r.simpleReply(); e != 0 || c != 3 {
		t.Fatalf("flush over TLS: %d %d", e, c)
	}

	// NBD_OPT_EXPORT_NAME cannot be refused softly: the server hangs up.
	r2 := dialRaw(t, srv)
	r2.greet(nbdtest.FlagFixedNewstyle)
	r2.send(nbdtest.Option(nbdtest.OptExportName, []byte("e")))
	r2.expectClosed()

	// The nbdtest client over TLS.
	c := dial(t, srv, nbdtest.Options{Export: "e", TLS: pki.clientConfig(), BlockStatus: true})
	ctx := context.Background()
	if err := c.WriteAt(ctx, []byte("secret"), 100, 0); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 6)
	if err := c.ReadAt(ctx, got, 100); err != nil || string(got) != "secret" {
		t.Fatalf("read over TLS %q, %v", got, err)
	}
}

func TestTLSNbdinfo(t *testing.T) {
	nbdinfo := nbdtest.RequireTool(t, "nbdinfo", "libnbd-bin")
	pki := newTestPKI(t)
	m, _ := nbd.NewMemory(2 << 20)
	srv := nbdtest.Start(t, nbd.Config{
		Exports:    []*nbd.Export{{Name: "e", Backend: m}},
		TLSConfig:  pki.serverConfig(),
		RequireTLS: true,
	})
	uri := "nbds+unix:///e?socket=" + srv.Socket + "&tls-certificates=" + pki.dir + "&tls-verify-peer=false"
	out := run(t, nbdinfo, uri)
	if !strings.Contains(out, "with TLS") || !strings.Contains(out, "export-size: 2097152") {
		t.Fatalf("nbdinfo over TLS:\n%s", out)
	}
}

// verifyingConfig asks every client for a certificate signed by the CA.
func (p *testPKI) verifyingConfig() *tls.Config {
	c := p.serverConfig()
	c.ClientAuth = tls.RequireAndVerifyClientCert
	c.ClientCAs = p.pool
	return c
}

// tlsRaw negotiates STARTTLS on a raw connection with cfg and returns
// the TLS handshake's error.
func tlsRaw(t *testing.T, srv *nbdtest.Server, cfg *tls.Config) (*rawConn, error) {
	t.Helper()
	r := dialRaw(t, srv)
	r.greet(nbdtest.FlagFixedNewstyle)
	r.expectOpt(nbdtest.OptStartTLS, nil, nbdtest.RepAck)
	tc := tls.Client(r.c, cfg)
	err := tc.Handshake()
	r.c, r.br = tc, bufio.NewReader(tc)
	return r, err
}

func TestTLSVerifyPeer(t *testing.T) {
	pki := newTestPKI(t)
	m, _ := nbd.NewMemory(1 << 20)
	srv := nbdtest.Start(t, nbd.Config{
		Exports:    []*nbd.Export{{Name: "e", Backend: m}},
		TLSConfig:  pki.verifyingConfig(),
		RequireTLS: true,
	})

	// refused: the TLS handshake fails, or (TLS 1.3, where the client
	// finishes first) the first read does; no option is ever answered.
	refused := func(what string, cfg *tls.Config) {
		t.Helper()
		r, err := tlsRaw(t, srv, cfg)
		if err == nil {
			r.send(nbdtest.Option(nbdtest.OptList, nil))
			var rep nbdtest.OptReply
			if rep, err = nbdtest.ReadOptReply(r.br); err == nil {
				t.Fatalf("%s: the server answered NBD_OPT_LIST with %#x", what, rep.Type)
			}
		}
		if !strings.Contains(err.Error(), "certificate") {
			t.Fatalf("%s: %v, want a certificate error", what, err)
		}
	}
	refused("no client certificate", pki.clientConfig())

	other := newTestPKI(t)
	cfg := pki.clientConfig()
	cfg.Certificates = []tls.Certificate{other.issue(t, "mallory", x509.ExtKeyUsageClientAuth)}
	refused("certificate of another CA", cfg)

	cfg = pki.clientConfig()
	cfg.Certificates = []tls.Certificate{pki.issue(t, "alice", x509.ExtKeyUsageClientAuth)}
	c := dial(t, srv, nbdtest.Options{Export: "e", TLS: cfg})
	ctx := context.Background()
	if err := c.WriteAt(ctx, []byte("verified"), 0, 0); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 8)
	if err := c.ReadAt(ctx, got, 0); err != nil || string(got) != "verified" {
		t.Fatalf("read with a client certificate: %q, %v", got, err)
	}

	// Without TLS nothing is served either.
	r := dialRaw(t, srv)
	r.greet(nbdtest.FlagFixedNewstyle)
	r.expectOpt(nbdtest.OptGo, nbdtest.InfoData("e"), nbdtest.RepErrTLSReqd)
}

// TestTLSVerifyPeerNeedsRequireTLS: asking for client certificates
// while letting clients skip TLS is refused, not served half-protected.
func TestTLSVerifyPeerNeedsRequireTLS(t *testing.T) {
	pki := newTestPKI(t)
	_, err := nbd.NewServer(nbd.Config{TLSConfig: pki.verifyingConfig()})
	if err == nil || !strings.Contains(err.Error(), "RequireTLS") {
		t.Fatalf("NewServer with client certificates but without RequireTLS: %v", err)
	}
}

// TestTLSVerifyPeerNbdinfo: libnbd with the client certificate in its
// tls-certificates directory gets in; without it, it does not.
func TestTLSVerifyPeerNbdinfo(t *testing.T) {
	nbdinfo := nbdtest.RequireTool(t, "nbdinfo", "libnbd-bin")
	pki := newTestPKI(t)
	m, _ := nbd.NewMemory(2 << 20)
	srv := nbdtest.Start(t, nbd.Config{
		Exports:    []*nbd.Export{{Name: "e", Backend: m}},
		TLSConfig:  pki.verifyingConfig(),
		RequireTLS: true,
	})
	uri := func(dir string) string {
		return "nbds+unix:///e?socket=" + srv.Socket + "&tls-certificates=" + dir
	}
	// pki.dir holds only ca-cert.pem: the server ends the TLS handshake
	// with an alert (certificate_required), as gnutls reports.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, nbdinfo, uri(pki.dir)).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "TLS fatal alert") {
		t.Fatalf("nbdinfo without a client certificate: %v\n%s", err, out)
	}
	t.Logf("nbdinfo without a client certificate: %s", out)

	withCert := t.TempDir()
	ca, err := os.ReadFile(filepath.Join(pki.dir, "ca-cert.pem"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(withCert, "ca-cert.pem"), ca, 0o600); err != nil {
		t.Fatal(err)
	}
	writeCert(t, pki.issue(t, "nbdinfo", x509.ExtKeyUsageClientAuth),
		filepath.Join(withCert, "client-cert.pem"), filepath.Join(withCert, "client-key.pem"))
	out = []byte(run(t, nbdinfo, uri(withCert)))
	if !bytes.Contains(out, []byte("with TLS")) || !bytes.Contains(out, []byte("export-size: 2097152")) {
		t.Fatalf("nbdinfo with a client certificate:\n%s", out)
	}
}
