package nbd_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/purerbd/purerbd/nbd"
	"github.com/purerbd/purerbd/nbd/nbdtest"
)

func TestTLSRequired(t *testing.T) {
	pki := nbdtest.NewPKI(t)
	m, _ := nbd.NewMemory(1 << 20)
	srv := nbdtest.Start(t, nbd.Config{
		Exports:    []*nbd.Export{{Name: "e", Backend: m}},
		TLSConfig:  pki.ServerConfig(),
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
	tc := tls.Client(r.c, pki.ClientConfig())
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
	c := dial(t, srv, nbdtest.Options{Export: "e", TLS: pki.ClientConfig(), BlockStatus: true})
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
	pki := nbdtest.NewPKI(t)
	m, _ := nbd.NewMemory(2 << 20)
	srv := nbdtest.Start(t, nbd.Config{
		Exports:    []*nbd.Export{{Name: "e", Backend: m}},
		TLSConfig:  pki.ServerConfig(),
		RequireTLS: true,
	})
	uri := "nbds+unix:///e?socket=" + srv.Socket + "&tls-certificates=" + pki.Dir + "&tls-verify-peer=false"
	out := run(t, nbdinfo, uri)
	if !strings.Contains(out, "with TLS") || !strings.Contains(out, "export-size: 2097152") {
		t.Fatalf("nbdinfo over TLS:\n%s", out)
	}
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
	pki := nbdtest.NewPKI(t)
	m, _ := nbd.NewMemory(1 << 20)
	srv := nbdtest.Start(t, nbd.Config{
		Exports:    []*nbd.Export{{Name: "e", Backend: m}},
		TLSConfig:  pki.VerifyingConfig(),
		RequireTLS: true,
	})

	// refused: the TLS handshake fails, or (TLS 1.3, where the client
	// finishes first) the first read does; no option is ever answered.
	refused := func(what string, cfg *tls.Config) {
		t.Helper()
		r, err := tlsRaw(t, srv, cfg)
		if err == nil {
			// The write may fail, or not, depending on how soon the
			// server's alert closes the connection; the read gets the
			// alert either way.
			r.c.Write(nbdtest.Option(nbdtest.OptList, nil))
			var rep nbdtest.OptReply
			if rep, err = nbdtest.ReadOptReply(r.br); err == nil {
				t.Fatalf("%s: the server answered NBD_OPT_LIST with %#x", what, rep.Type)
			}
		}
		if !strings.Contains(err.Error(), "tls: ") {
			t.Fatalf("%s: %v, want a TLS alert", what, err)
		}
		t.Logf("%s: %v", what, err)
	}
	refused("no client certificate", pki.ClientConfig())

	other := nbdtest.NewPKI(t)
	refused("certificate of another CA", pki.ClientConfig(other.Issue(t, "mallory", x509.ExtKeyUsageClientAuth)))
	refused("server certificate of the CA", pki.ClientConfig(pki.Server))

	cfg := pki.ClientConfig(pki.Issue(t, "alice", x509.ExtKeyUsageClientAuth))
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
	pki := nbdtest.NewPKI(t)
	_, err := nbd.NewServer(nbd.Config{TLSConfig: pki.VerifyingConfig()})
	if err == nil || !strings.Contains(err.Error(), "RequireTLS") {
		t.Fatalf("NewServer with client certificates but without RequireTLS: %v", err)
	}
}

// TestTLSVerifyPeerNbdinfo: libnbd with the client certificate in its
// tls-certificates directory gets in; without it, it does not.
func TestTLSVerifyPeerNbdinfo(t *testing.T) {
	nbdinfo := nbdtest.RequireTool(t, "nbdinfo", "libnbd-bin")
	pki := nbdtest.NewPKI(t)
	m, _ := nbd.NewMemory(2 << 20)
	srv := nbdtest.Start(t, nbd.Config{
		Exports:    []*nbd.Export{{Name: "e", Backend: m}},
		TLSConfig:  pki.VerifyingConfig(),
		RequireTLS: true,
	})
	uri := func(dir string) string {
		return "nbds+unix:///e?socket=" + srv.Socket + "&tls-certificates=" + dir
	}
	// pki.Dir holds no client certificate: the server ends the TLS
	// handshake with an alert, which gnutls reports as such or, when the
	// connection is gone before it reads it, as a failed send.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, nbdinfo, uri(pki.Dir)).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "gnutls_record_") || strings.Contains(string(out), "export-size") {
		t.Fatalf("nbdinfo without a client certificate: %v\n%s", err, out)
	}
	t.Logf("nbdinfo without a client certificate: %s", out)

	withCert := pki.ClientDir(t, "nbdinfo")
	out = []byte(run(t, nbdinfo, uri(withCert)))
	if !bytes.Contains(out, []byte("with TLS")) || !bytes.Contains(out, []byte("export-size: 2097152")) {
		t.Fatalf("nbdinfo with a client certificate:\n%s", out)
	}
}
