package csi

import (
	"context"
	"errors"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// inFlight remembers the keys (volume names, image and snapshot keys)
// that have an operation running. The CO should never send two calls for
// one volume at a time, but after losing state it may; a second call is
// refused with ABORTED, as the spec suggests, rather than queued.
type inFlight struct {
	mu   sync.Mutex
	keys map[string]struct{}
}

func newInFlight() *inFlight { return &inFlight{keys: map[string]struct{}{}} }

// lock takes every key or none. It returns an ABORTED status naming the
// first busy key, or a function that releases them all.
func (f *inFlight) lock(keys ...string) (unlock func(), err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, k := range keys {
		if _, busy := f.keys[k]; busy {
			return nil, status.Errorf(codes.Aborted, "an operation on %s is already in progress", k)
		}
	}
	for _, k := range keys {
		f.keys[k] = struct{}{}
	}
	return func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		for _, k := range keys {
			delete(f.keys, k)
		}
	}, nil
}

func nameKey(kind, name string) string { return kind + " name " + name }

func imageKey(cluster string, img ImageRef) string {
	if img.Name == "" {
		return "image " + cluster + "/" + itoa(img.Pool) + "/" + img.Namespace + "/#" + img.ID
	}
	return "image " + cluster + "/" + itoa(img.Pool) + "/" + img.Namespace + "/" + img.Name
}

// lockImages keeps the controller's operations on imgs (of cluster)
// apart: in this process (inFlight), and across the replicas of the
// controller (lockAcross).
func (d *Driver) lockImages(ctx context.Context, s Session, cluster string, imgs ...ImageRef) (unlock func(), err error) {
	keys := make([]string, len(imgs))
	for i, img := range imgs {
		keys[i] = imageKey(cluster, img)
	}
	local, err := d.inFlight.lock(keys...)
	if err != nil {
		return nil, err
	}
	across, err := d.lockAcross(ctx, s, cluster, imgs...)
	if err != nil {
		local()
		return nil, err
	}
	return func() { across(); local() }, nil
}

// lockAcross takes the operation locks of imgs that every replica of
// the controller sees: a lock in each image's pool namespace that
// expires unless its holder renews it (Session.LockOperation). A lock
// held elsewhere is ABORTED, as the spec asks for an operation already
// in progress; the sidecar retries.
func (d *Driver) lockAcross(ctx context.Context, s Session, cluster string, imgs ...ImageRef) (unlock func(), err error) {
	var releases []func()
	unlock = func() {
		for i := len(releases) - 1; i >= 0; i-- {
			releases[i]()
		}
	}
	for _, img := range imgs {
		key := imageKey(cluster, img)
		release, err := s.LockOperation(ctx, img.Pool, img.Namespace, key)
		if err != nil {
			unlock()
			if errors.Is(err, ErrBusy) {
				return nil, status.Errorf(codes.Aborted, "an operation on %s is already in progress in another controller replica", key)
			}
			return nil, status.Errorf(codes.Unavailable, "taking the operation lock of %s: %v", key, err)
		}
		releases = append(releases, release)
	}
	return unlock, nil
}
