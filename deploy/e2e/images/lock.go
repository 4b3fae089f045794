package images

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"syscall"
	"time"
)

// lockPoll is how often a waiting builder tries the lock again.
const lockPoll = 500 * time.Millisecond

// lock takes an exclusive flock on path, waiting while another builder
// holds it (the kernel drops it when its holder dies), and returns the
// function that releases it.
func lock(ctx context.Context, log *slog.Logger, path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("images: lock: %w", err)
	}
	for waited := false; ; waited = true {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { f.Close() }, nil
		}
		if err != syscall.EWOULDBLOCK && err != syscall.EINTR {
			f.Close()
			return nil, fmt.Errorf("images: lock %s: %w", path, err)
		}
		if !waited {
			log.Info("images: waiting for another build to finish", "lock", path)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("images: waiting for %s: %w", path, ctx.Err())
		case <-time.After(lockPoll):
		}
	}
}
