package nbdtest

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"testing"
	"time"

	"github.com/purerbd/purerbd/nbd"
)

// Server is an nbd.Server serving on a Unix socket in a test's temporary
// directory. It is closed when the test ends.
type Server struct {
	*nbd.Server
	// Socket is the path of the Unix socket.
	Socket string
	// Dir is the temporary directory holding the socket.
	Dir string
}

// Start serves cfg on a new Unix socket and stops the server at the end
// of the test (Close, then a check that Serve returned).
func Start(tb testing.TB, cfg nbd.Config) *Server {
	tb.Helper()
	srv, err := nbd.NewServer(cfg)
	if err != nil {
		tb.Fatalf("nbdtest: new server: %v", err)
	}
	dir := tb.TempDir()
	sock := filepath.Join(dir, "nbd.sock")
	l, err := nbd.ListenUnix(sock, 0)
	if err != nil {
		tb.Fatalf("nbdtest: %v", err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(context.Background(), l) }()
	tb.Cleanup(func() {
		srv.Close()
		select {
		case err := <-served:
			if !errors.Is(err, nbd.ErrServerClosed) {
				tb.Errorf("nbdtest: Serve returned %v, want ErrServerClosed", err)
			}
		case <-time.After(10 * time.Second):
			tb.Errorf("nbdtest: Serve did not return after Close")
		}
	})
	return &Server{Server: srv, Socket: sock, Dir: dir}
}

// StartMemory serves one sparse memory export of the given size under
// name and returns the server and the backend.
func StartMemory(tb testing.TB, name string, size int64) (*Server, *nbd.Memory) {
	tb.Helper()
	m, err := nbd.NewMemory(size)
	if err != nil {
		tb.Fatal(err)
	}
	return Start(tb, nbd.Config{Exports: []*nbd.Export{{Name: name, Backend: m}}}), m
}

// URI is the NBD URI of an export of s, as libnbd, qemu and fio take it.
func (s *Server) URI(export string) string {
	return fmt.Sprintf("nbd+unix:///%s?socket=%s", url.PathEscape(export), s.Socket)
}
