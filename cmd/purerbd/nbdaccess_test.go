package main

import (
	"bufio"
	"context"
	"net"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/purerbd/purerbd/internal/syncbuf"
	"github.com/purerbd/purerbd/nbd/nbdtest"
)

// Who may connect to `purerbd nbd serve`: the refusal to listen beyond
// loopback for unverified clients, client certificates checked by real
// clients (nbdinfo, qemu-io), and the connection limit.

// TestNBDServeRefusesOpenListen: without client verification, serve
// refuses an address other hosts can reach, before it listens or opens
// anything.
func TestNBDServeRefusesOpenListen(t *testing.T) {
	pki := nbdtest.NewPKI(t)
	for _, args := range [][]string{
		{"--tcp", "0.0.0.0:0"},
		{"--tcp", "[::]:0"},
		{"--tcp", "192.0.2.1:10809"},
		// TLS without client certificates encrypts but lets anyone in.
		{"--tcp", "0.0.0.0:0", "--tls-certificates", pki.Dir, "--tls-required"},
	} {
		var stdout, stderr syncbuf.Buffer
		// A server that did listen stops when ctx ends, and fails below.
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		err := runNBDServe(ctx, append([]string{"--memory", "1M"}, args...), &stdout, &stderr)
		cancel()
		if err == nil || !strings.Contains(err.Error(), "--insecure-listen") || !strings.Contains(err.Error(), "--tls-verify-peer") {
			t.Errorf("nbd serve %v: %v, want the refusal naming --tls-verify-peer and --insecure-listen", args, err)
		}
		if stdout.String() != "" {
			t.Errorf("nbd serve %v listened: %q", args, stdout.String())
		}
	}
}

func TestCheckListenExposure(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		addr               string
		verified, insecure bool
		ok                 bool
	}{
		{"", false, false, true}, // no --tcp
		{":10809", false, false, true},
		{"127.0.0.1:10809", false, false, true},
		{"localhost:10809", false, false, true},
		{"[::1]:10809", false, false, true},
		{"0.0.0.0:10809", false, false, false},
		{"0.0.0.0:10809", true, false, true},
		{"0.0.0.0:10809", false, true, true},
		{"[::]:10809", false, false, false},
		{"198.51.100.4:10809", false, false, false},
		{"198.51.100.4:10809", true, false, true},
		{"10809", false, false, false}, // malformed
	} {
		err := checkListenExposure(ctx, c.addr, c.verified, c.insecure)
		if (err == nil) != c.ok {
			t.Errorf("checkListenExposure(%q, verified %v, insecure %v) = %v, want ok %v", c.addr, c.verified, c.insecure, err, c.ok)
		}
	}
}

func TestNBDServeTLSFlagErrors(t *testing.T) {
	pki := nbdtest.NewPKI(t)
	cert, key := filepath.Join(pki.Dir, "server-cert.pem"), filepath.Join(pki.Dir, "server-key.pem")
	ca := filepath.Join(pki.Dir, "ca-cert.pem")
	sock := filepath.Join(t.TempDir(), "s")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--tls-verify-peer"}, "--tls-ca"},
		{[]string{"--tls-cert", cert, "--tls-key", key, "--tls-verify-peer"}, "--tls-ca"},
		{[]string{"--tls-cert", cert, "--tls-key", key, "--tls-ca", ca}, "only with --tls-verify-peer"},
		{[]string{"--tls-certificates", pki.Dir, "--tls-cert", cert}, "not both"},
		{[]string{"--tls-ca", ca, "--tls-verify-peer"}, "--tls-cert"},
		{[]string{"--tls-required"}, "--tls-cert"},
		{[]string{"--tls-certificates", t.TempDir(), "--tls-verify-peer"}, "ca-cert.pem"},
		{[]string{"--tls-cert", cert, "--tls-key", key, "--tls-ca", cert + ".missing", "--tls-verify-peer"}, "no such file"},
		{[]string{"--max-reply-bytes", "lots"}, "--max-reply-bytes"},
		{[]string{"--max-connections", "-1"}, "--max-connections"},
		{[]string{"--handshake-timeout", "0"}, "--handshake-timeout"},
	} {
		var stdout, stderr syncbuf.Buffer
		err := runNBDServe(context.Background(), append([]string{"--memory", "1M", "--socket", sock}, c.args...), &stdout, &stderr)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("nbd serve %v: %v, want an error naming %q", c.args, err, c.want)
		}
	}
}

// TestNBDServeVerifyPeer: with --tls-verify-peer only a client holding a
// certificate from the CA gets in, over TLS; nbdinfo and qemu-io with
// and without one.
func TestNBDServeVerifyPeer(t *testing.T) {
	nbdinfo := nbdtest.RequireTool(t, "nbdinfo", "libnbd-bin")
	qemuIO := nbdtest.RequireTool(t, "qemu-io", "qemu-utils")
	pki := nbdtest.NewPKI(t)
	s := startServe(t, "--memory", "1M", "--export-name", "e", "--tls-certificates", pki.Dir, "--tls-verify-peer")
	defer s.stop(t)
	client := pki.ClientDir(t, "alice")
	uri := func(dir string) string {
		return "nbds+unix:///e?socket=" + s.socket + "&tls-certificates=" + dir
	}
	tool := func(name string, args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
		return string(out), err
	}

	out, err := tool(nbdinfo, uri(client))
	if err != nil || !strings.Contains(out, "with TLS") || !strings.Contains(out, "export-size: 1048576") {
		t.Fatalf("nbdinfo with a client certificate: %v\n%s", err, out)
	}
	if out, err := tool(nbdinfo, uri(pki.Dir)); err == nil || strings.Contains(out, "export-size") {
		t.Fatalf("nbdinfo without a client certificate got in: %v\n%s", err, out)
	}
	if out, err := tool(nbdinfo, "nbd+unix:///e?socket="+s.socket); err == nil || strings.Contains(out, "export-size") {
		t.Fatalf("nbdinfo without TLS got in: %v\n%s", err, out)
	}

	qemu := func(dir string) (string, error) {
		return tool(qemuIO,
			"--object", "tls-creds-x509,id=tls0,endpoint=client,dir="+dir,
			"--image-opts", "driver=nbd,path="+s.socket+",export=e,tls-creds=tls0,tls-hostname=localhost",
			"-c", "write -P 0x5a 4096 4096", "-c", "read -P 0x5a 4096 4096")
	}
	if out, err := qemu(client); err != nil || !strings.Contains(out, "read 4096/4096") || strings.Contains(out, "Pattern verification failed") {
		t.Fatalf("qemu-io with a client certificate: %v\n%s", err, out)
	}
	if out, err := qemu(pki.Dir); err == nil {
		t.Fatalf("qemu-io without a client certificate got in:\n%s", out)
	} else {
		t.Logf("qemu-io without a client certificate: %v: %s", err, strings.TrimSpace(out))
	}
}

// TestNBDServeConnectionLimit: a connection over --max-connections is
// closed, and the refusal is logged without -v.
func TestNBDServeConnectionLimit(t *testing.T) {
	s := startServe(t, "--memory", "1M", "--max-connections", "1")
	defer s.stop(t)
	// startServe's own probe may still hold the slot for a moment.
	var first net.Conn
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.Dial("unix", s.socket)
		if err != nil {
			t.Fatal(err)
		}
		c.SetReadDeadline(time.Now().Add(2 * time.Second))
		if _, err = nbdtest.ReadGreeting(bufio.NewReader(c)); err == nil {
			first = c
			break
		}
		c.Close()
		if time.Now().After(deadline) {
			t.Fatalf("no greeting: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	defer first.Close()

	c, err := net.Dial("unix", s.socket)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	var b [1]byte
	if n, err := c.Read(b[:]); n != 0 || err == nil {
		t.Fatalf("second connection over --max-connections 1: read %d bytes, %v", n, err)
	}
	if log := s.stderr.String(); !strings.Contains(log, "connection limit reached") {
		t.Fatalf("refusal not logged:\n%s", log)
	}
}
