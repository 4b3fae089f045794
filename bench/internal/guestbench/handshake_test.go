package guestbench

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/purerbd/purerbd/internal/shorttier"
)

// TestHandshakeNbdkit runs the client handshake against a real nbdkit
// (memory plugin) and then one NBD_CMD_READ in the transmission phase:
// the socket handed to the kernel must be ready for requests.
func TestHandshakeNbdkit(t *testing.T) {
	shorttier.Skip(t, "nbdkit")
	bin, err := exec.LookPath("nbdkit")
	if err != nil {
		t.Fatalf("nbdkit is not installed (make deps): %v", err)
	}
	sock := filepath.Join(t.TempDir(), "nbdkit.sock")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "-f", "-U", sock, "memory", "8M")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	var conn net.Conn
	for i := 0; ; i++ {
		if conn, err = net.Dial("unix", sock); err == nil {
			break
		}
		if i > 100 {
			t.Fatalf("nbdkit does not listen: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	defer conn.Close()
	size, flags, err := handshake(conn)
	if err != nil {
		t.Fatal(err)
	}
	if size != 8<<20 || flags&1 == 0 {
		t.Fatalf("size %d flags %#x, want 8 MiB and NBD_FLAG_HAS_FLAGS", size, flags)
	}
	// NBD_CMD_READ of 512 bytes at 0: simple reply, zeros
	var req [28]byte
	binary.BigEndian.PutUint32(req[0:], 0x25609513)
	binary.BigEndian.PutUint16(req[6:], 0) // read
	binary.BigEndian.PutUint64(req[8:], 42)
	binary.BigEndian.PutUint32(req[24:], 512)
	if _, err := conn.Write(req[:]); err != nil {
		t.Fatal(err)
	}
	rep := make([]byte, 16+512)
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadFull(conn, rep); err != nil {
		t.Fatal(err)
	}
	if binary.BigEndian.Uint32(rep[0:]) != 0x67446698 || binary.BigEndian.Uint32(rep[4:]) != 0 ||
		binary.BigEndian.Uint64(rep[8:]) != 42 {
		t.Fatalf("reply header % x", rep[:16])
	}
}
