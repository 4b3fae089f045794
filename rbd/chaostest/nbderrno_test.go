package chaostest

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/purerbd/purerbd/nbd"
	"github.com/purerbd/purerbd/nbd/nbdtest"
)

// timeoutBackend fails every write as an RBD image does when the OSD
// holding the data does not answer within the operation timeout.
type timeoutBackend struct{ size int64 }

func (b timeoutBackend) ReadAt(_ context.Context, p []byte, _ int64) (int, error) {
	clear(p)
	return len(p), nil
}

func (b timeoutBackend) WriteAt(context.Context, []byte, int64) (int, error) {
	return 0, fmt.Errorf("rbd: writing rbd_data.x.0: osdc: write: %w", context.DeadlineExceeded)
}

func (b timeoutBackend) Size() int64 { return b.size }

// TestNBDBackendTimeoutIsEIO checks that a backend operation that timed
// out reaches the NBD client as NBD_EIO: NBD_ESHUTDOWN says the server is
// going away, which it is not, and a client that believes it reconnects
// and sends the request again instead of reporting the I/O error.
func TestNBDBackendTimeoutIsEIO(t *testing.T) {
	srv, err := nbd.NewServer(nbd.Config{Exports: []*nbd.Export{{Name: "x", Backend: timeoutBackend{1 << 20}}}})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	sock := filepath.Join(t.TempDir(), "nbd.sock")
	l, err := nbd.ListenUnix(sock, 0)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	go srv.Serve(ctx, l)
	c, err := nbdtest.Dial(ctx, "unix", sock, nbdtest.Options{Export: "x"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	err = c.WriteAt(ctx, make([]byte, 4096), 0, 0)
	var re *nbdtest.ReplyError
	if !errors.As(err, &re) {
		t.Fatalf("write: %v, want an error reply", err)
	}
	if re.Errno != nbdtest.EIO {
		t.Errorf("a backend timeout was answered with errno %d, want NBD_EIO (%d)", re.Errno, nbdtest.EIO)
	}
}
