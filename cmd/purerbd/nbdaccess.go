package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/purerbd/purerbd/internal/cli"
	"github.com/purerbd/purerbd/nbd"
)

// Who may connect to `purerbd nbd serve`: TLS, the verification of client
// certificates, and where the server may listen without it. NBD has no
// authentication of its own, so a client that reaches the socket can read
// and write the export, an RBD image included, without cephx.

// nbdTLSFlags are serve's TLS flags, named as nbdkit and qemu-nbd name
// theirs.
type nbdTLSFlags struct {
	cert, key  string
	ca         string
	dir        string // nbdkit's --tls-certificates layout
	required   bool
	verifyPeer bool
}

func (f *nbdTLSFlags) register(c *cli.Command) {
	c.String(&f.cert, "--tls-cert FILE", "TLS certificate (PEM) enabling NBD_OPT_STARTTLS")
	c.String(&f.key, "--tls-key FILE", "TLS private key (PEM)")
	c.String(&f.ca, "--tls-ca FILE", "with --tls-verify-peer: CA certificates (PEM) that client certificates must chain to")
	c.String(&f.dir, "--tls-certificates DIR", "directory holding server-cert.pem, server-key.pem and, for --tls-verify-peer, ca-cert.pem (as nbdkit and qemu-nbd read it)")
	c.Bool(&f.required, "--tls-required", "refuse clients that do not start TLS")
	c.Bool(&f.verifyPeer, "--tls-verify-peer", "admit only clients presenting a certificate signed by --tls-ca (implies --tls-required)")
}

// config builds the server's TLS configuration: nil without TLS.
func (f nbdTLSFlags) config() (cfg *tls.Config, required bool, err error) {
	cert, key, ca := f.cert, f.key, f.ca
	if f.dir != "" {
		if cert != "" || key != "" {
			return nil, false, errors.New("give --tls-certificates or --tls-cert and --tls-key, not both")
		}
		cert, key = filepath.Join(f.dir, "server-cert.pem"), filepath.Join(f.dir, "server-key.pem")
		if p := filepath.Join(f.dir, "ca-cert.pem"); ca == "" && f.verifyPeer {
			if _, err := os.Stat(p); err == nil || !errors.Is(err, fs.ErrNotExist) {
				ca = p
			}
		}
	}
	switch {
	case f.ca != "" && !f.verifyPeer:
		return nil, false, errors.New("--tls-ca is used only with --tls-verify-peer")
	case f.verifyPeer && ca == "":
		return nil, false, errors.New("--tls-verify-peer needs --tls-ca (or ca-cert.pem in --tls-certificates)")
	case (f.verifyPeer || f.required) && cert == "":
		return nil, false, errors.New("TLS needs --tls-cert and --tls-key, or --tls-certificates")
	case cert == "" && key == "":
		return nil, false, nil
	}
	pair, err := tls.LoadX509KeyPair(cert, key)
	if err != nil {
		return nil, false, fmt.Errorf("TLS: %w", err)
	}
	cfg = &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}
	if f.verifyPeer {
		pem, err := os.ReadFile(ca)
		if err != nil {
			return nil, false, fmt.Errorf("TLS: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, false, fmt.Errorf("TLS: no PEM certificate in %s", ca)
		}
		cfg.ClientCAs = pool
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return cfg, f.required || f.verifyPeer, nil
}

// checkListenExposure refuses a TCP address beyond loopback when clients
// are not verified, unless the user accepted that with --insecure-listen.
func checkListenExposure(ctx context.Context, addr string, verified, insecure bool) error {
	if addr == "" || verified || insecure {
		return nil
	}
	lo, err := nbd.LoopbackOnly(ctx, addr)
	if err != nil {
		return fmt.Errorf("--tcp: %w", err)
	}
	if lo {
		return nil
	}
	return fmt.Errorf("--tcp %s is reachable from other hosts and clients are not verified: "+
		"anyone who reaches it could read and write the export (an RBD image without cephx); "+
		"add --tls-verify-peer with --tls-ca, or --insecure-listen to accept that", addr)
}
