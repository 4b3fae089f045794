package csi

import (
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
