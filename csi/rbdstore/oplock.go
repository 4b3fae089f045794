package rbdstore

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/purerbd/purerbd/csi"
	"github.com/purerbd/purerbd/rados"
)

// The controller's operation locks: an exclusive-ephemeral advisory
// lock (the OSD's lock class) on an object of its own per key, in the
// image's pool namespace, removed with its lock. They last
// opLockDuration unless renewed, and a holder renews every opLockRenew,
// so that a controller replica that dies leaves its locks for at most
// opLockDuration (and their empty objects until the key is locked
// again).
const (
	opLockObjectPrefix = "purerbd_csi_op."
	opLockName         = "purerbd-csi-op"
	opLockDuration     = 30 * time.Second
	opLockRenew        = 10 * time.Second
)

// opLockObject is the lock object of key: a hash (the key itself goes
// into the lock's description).
func opLockObject(key string) string {
	sum := sha256.Sum256([]byte(key))
	return opLockObjectPrefix + hex.EncodeToString(sum[:16])
}

func (s *session) LockOperation(ctx context.Context, pool int64, ns, key string) (func(), error) {
	io, err := s.ioctx(ctx, pool, ns)
	if err != nil {
		return nil, err
	}
	var c [12]byte
	if _, err := rand.Read(c[:]); err != nil {
		return nil, fmt.Errorf("operation lock cookie: %w", err)
	}
	cookie, oid := hex.EncodeToString(c[:]), opLockObject(key)
	err = io.LockExclusive(ctx, oid, opLockName, cookie, key, rados.LockOptions{Duration: opLockDuration, Ephemeral: true})
	if errors.Is(err, rados.ErrBusy) {
		return nil, fmt.Errorf("%w: operation lock of %s: %w", csi.ErrBusy, key, err)
	}
	if err != nil {
		return nil, mapErr(err)
	}
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(opLockRenew)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				rctx, cancel := context.WithTimeout(context.Background(), opLockRenew)
				err := io.LockExclusive(rctx, oid, opLockName, cookie, key,
					rados.LockOptions{Duration: opLockDuration, Ephemeral: true, Renew: true})
				cancel()
				if err != nil {
					s.log.Warn("operation lock not renewed: another replica may start on the image once it expires",
						"key", key, "err", err)
				}
			}
		}
	}()
	return func() {
		close(stop)
		<-done
		uctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := io.Unlock(uctx, oid, opLockName, cookie); err != nil && !errors.Is(err, rados.ErrNotFound) {
			s.log.Warn("operation lock not released: it expires on its own", "key", key, "err", err)
		}
	}, nil
}
