package netnsdial

import (
	"bufio"
	"context"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/purerbd/purerbd/rados"
	"github.com/purerbd/purerbd/rados/radostest/cephcluster"
	"github.com/purerbd/purerbd/rados/radostest/netns"
)

// TestDialInsideNamespace dials a listener that exists only inside a
// test's network namespace (its subnet is blackholed in the root one),
// and checks that the process's other connections stay in its own
// namespace afterwards.
func TestDialInsideNamespace(t *testing.T) {
	ns := netns.New(t, netns.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const rounds = 20
	addr := net.JoinHostPort(ns.HostIP, "7301")
	// a server inside the namespace: it answers each connection with a
	// line naming itself
	srv := ns.Command(ctx, "python3", "-c", `
import socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], 7301))
s.listen()
print("listening", flush=True)
for _ in range(int(sys.argv[2])):
    c, _ = s.accept()
    c.sendall(b"inside\n")
    c.close()
`, ns.HostIP, "20")
	out, err := srv.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Process.Kill(); srv.Wait() })
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "listening\n" {
		t.Fatalf("the server inside the namespace did not start: %q %v", line, err)
	}

	// a listener in the process's own namespace, on loopback
	own, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer own.Close()
	go func() {
		for {
			c, err := own.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()

	// from the root namespace the address is unreachable
	var nd net.Dialer
	if c, err := nd.DialContext(ctx, "tcp", addr); err == nil {
		c.Close()
		t.Fatalf("%s answered from the root namespace: the test proves nothing", addr)
	}

	d, err := Open(filepath.Join("/run/netns", ns.Name))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if !d.Current() {
		t.Fatal("a freshly opened namespace is not current")
	}
	for i := range rounds {
		c, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			t.Fatalf("round %d: %v", i, err)
		}
		b, err := io.ReadAll(c)
		c.Close()
		if err != nil || string(b) != "inside\n" {
			t.Fatalf("round %d: read %q, %v", i, b, err)
		}
		// the thread went back: the process's own loopback still answers
		c, err = nd.DialContext(ctx, "tcp", own.Addr().String())
		if err != nil {
			t.Fatalf("round %d: a dial in the process's own namespace after one inside: %v", i, err)
		}
		c.Close()
	}
}

func TestOpenRefusesOtherFiles(t *testing.T) {
	plain := filepath.Join(t.TempDir(), "plain")
	if err := os.WriteFile(plain, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(plain); err == nil || !strings.Contains(err.Error(), "not a namespace file") {
		t.Fatalf("a plain file: %v", err)
	}
	if _, err := Open("/proc/self/ns/mnt"); err == nil || !strings.Contains(err.Error(), "not a network namespace") {
		t.Fatalf("a mount namespace: %v", err)
	}
	if _, err := Open("/nonexistent/net"); err == nil {
		t.Fatal("a missing file was opened")
	}
	d, err := Open("/proc/self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	if !d.Current() {
		t.Error("the process's own namespace is not current")
	}
	d.Close()
}

// TestRadosThroughNamespace connects a rados.Conn to a cluster that
// lives only inside a network namespace: the monitor session and the OSD
// sessions go through the Dialer, an object written is read back, and
// Ceph's rados (run inside the namespace) reads the same bytes.
func TestRadosThroughNamespace(t *testing.T) {
	ns := netns.New(t, netns.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cl, err := cephcluster.Start(ctx, cephcluster.Options{Netns: ns.Name, BindAddr: ns.HostIP})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	d, err := Open(filepath.Join("/run/netns", ns.Name))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	cfg := rados.Config{MonHost: cl.MonHost(), Key: cl.AdminKey, ConnectTimeout: 3 * time.Second}
	if c, err := rados.Connect(ctx, cfg); err == nil {
		c.Close()
		t.Fatal("the cluster answered from the root namespace: the test proves nothing")
	}
	cfg.DialContext, cfg.ConnectTimeout = d.DialContext, 30*time.Second
	conn, err := rados.Connect(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	io, err := conn.IOContext(ctx, cl.Pool, "")
	if err != nil {
		t.Fatal(err)
	}
	want := []byte("written through another network namespace")
	if err := io.WriteFull(ctx, "netnsdial", want); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 100)
	n, err := io.Read(ctx, "netnsdial", got, 0)
	if err != nil || string(got[:n]) != string(want) {
		t.Fatalf("read back %q, %v", got[:n], err)
	}
	out, err := cl.Rados(ctx, "-p", cl.Pool, "get", "netnsdial", "-")
	if err != nil || string(out) != string(want) {
		t.Fatalf("rados get: %q, %v", out, err)
	}
}

// TestCurrentFollowsThePath: a Dialer opened through a path (here a
// symlink) stops being current once the path names another namespace,
// as when the pod behind a bind-mounted path is recreated.
func TestCurrentFollowsThePath(t *testing.T) {
	ns := netns.New(t, netns.Options{})
	link := filepath.Join(t.TempDir(), "net")
	if err := os.Symlink("/proc/self/ns/net", link); err != nil {
		t.Fatal(err)
	}
	d, err := Open(link)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if !d.Current() {
		t.Fatal("not current right after Open")
	}
	if err := os.Remove(link); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join("/run/netns", ns.Name), link); err != nil {
		t.Fatal(err)
	}
	if d.Current() {
		t.Fatal("still current after its path came to name another namespace")
	}
	if err := os.Remove(link); err != nil {
		t.Fatal(err)
	}
	if d.Current() {
		t.Fatal("current with its path gone")
	}
}
