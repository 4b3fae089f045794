package nbdtest

import (
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
	"testing"
	"time"
)

// PKI is a throwaway certificate authority and a server certificate for
// "localhost" signed by it. Dir holds them as PEM files under the names
// nbdkit, qemu-nbd and libnbd look for: ca-cert.pem, server-cert.pem and
// server-key.pem.
type PKI struct {
	Dir    string
	Server tls.Certificate
	Pool   *x509.CertPool // holds the CA
	caCert *x509.Certificate
	caKey  *ecdsa.PrivateKey
}

// NewPKI makes a CA and a server certificate in a temporary directory.
func NewPKI(tb testing.TB) *PKI {
	tb.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
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
		tb.Fatal(err)
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		tb.Fatal(err)
	}
	p := &PKI{Dir: tb.TempDir(), Pool: x509.NewCertPool(), caCert: caCert, caKey: caKey}
	p.Pool.AddCert(caCert)
	writePEM(tb, filepath.Join(p.Dir, "ca-cert.pem"), "CERTIFICATE", caDER)
	p.Server = p.Issue(tb, "localhost", x509.ExtKeyUsageServerAuth)
	WriteCert(tb, p.Server, filepath.Join(p.Dir, "server-cert.pem"), filepath.Join(p.Dir, "server-key.pem"))
	return p
}

// Issue makes a certificate for name, signed by the CA, for usage
// (x509.ExtKeyUsageClientAuth for a client).
func (p *PKI) Issue(tb testing.TB, name string, usage x509.ExtKeyUsage) tls.Certificate {
	tb.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	if err != nil {
		tb.Fatal(err)
	}
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
		tb.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// ClientDir is a directory as libnbd's tls-certificates wants it: the
// CA, and a client certificate signed by it named name.
func (p *PKI) ClientDir(tb testing.TB, name string) string {
	tb.Helper()
	dir := tb.TempDir()
	writePEM(tb, filepath.Join(dir, "ca-cert.pem"), "CERTIFICATE", p.caCert.Raw)
	WriteCert(tb, p.Issue(tb, name, x509.ExtKeyUsageClientAuth),
		filepath.Join(dir, "client-cert.pem"), filepath.Join(dir, "client-key.pem"))
	return dir
}

// ServerConfig serves the server certificate and asks nothing of clients.
func (p *PKI) ServerConfig() *tls.Config {
	return &tls.Config{Certificates: []tls.Certificate{p.Server}, MinVersion: tls.VersionTLS12}
}

// VerifyingConfig is ServerConfig that also admits only clients with a
// certificate signed by the CA.
func (p *PKI) VerifyingConfig() *tls.Config {
	c := p.ServerConfig()
	c.ClientAuth = tls.RequireAndVerifyClientCert
	c.ClientCAs = p.Pool
	return c
}

// ClientConfig trusts the CA, expects "localhost" and presents certs.
func (p *PKI) ClientConfig(certs ...tls.Certificate) *tls.Config {
	return &tls.Config{RootCAs: p.Pool, ServerName: "localhost", MinVersion: tls.VersionTLS12, Certificates: certs}
}

// WriteCert writes c and its key as PEM files.
func WriteCert(tb testing.TB, c tls.Certificate, certPath, keyPath string) {
	tb.Helper()
	writePEM(tb, certPath, "CERTIFICATE", c.Certificate[0])
	der, err := x509.MarshalPKCS8PrivateKey(c.PrivateKey)
	if err != nil {
		tb.Fatal(err)
	}
	writePEM(tb, keyPath, "PRIVATE KEY", der)
}

func writePEM(tb testing.TB, path, typ string, der []byte) {
	tb.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		tb.Fatal(err)
	}
}
