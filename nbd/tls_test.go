package nbd_test

import (
	"bufio"
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
