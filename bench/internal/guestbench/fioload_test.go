package guestbench

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// TestFioOnDevice runs two cases through the host's fio on a file (on
// a filesystem with O_DIRECT) as -fio-load runs them on a guest's block
// device, and checks the figures read back from fio's output.
func TestFioOnDevice(t *testing.T) {
	fio, err := exec.LookPath("fio")
	if err != nil {
		t.Fatalf("fio (make deps): %v", err)
	}
	dir, err := os.MkdirTemp(".", "fioload")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	dev := filepath.Join(dir, "disk")
	const span = 8 << 20
	if err := os.WriteFile(dev, make([]byte, span), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, c := range []ioCase{ioCases(false)[0], ioCases(false)[3]} {
		r, err := fioOnDevice(ctx, fio, dev, c, span, time.Second)
		if err != nil {
			t.Fatalf("%s: %v", c.Name, err)
		}
		if r.ops <= 0 || r.bytes != r.ops*int64(c.BS) || r.seconds < 0.5 || r.seconds > 5 || !r.ownProcess ||
			r.summary == nil || r.summary.mean <= 0 || r.summary.pct[99] < r.summary.pct[50] {
			t.Errorf("%s: %+v, summary %+v", c.Name, r, r.summary)
		}
	}
	if _, err := fioOnDevice(ctx, fio, filepath.Join(dir, "absent"), ioCases(false)[0], span, time.Second); err == nil {
		t.Error("fio on a missing device succeeded")
	}
}
