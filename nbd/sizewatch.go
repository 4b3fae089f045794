package nbd

import "sync"

// sizeWatchers is the subscriber list behind a SizeNotifier.
type sizeWatchers struct {
	mu   sync.Mutex
	next int
	fns  map[int]func(int64)
}

func (w *sizeWatchers) add(fn func(int64)) (cancel func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.fns == nil {
		w.fns = make(map[int]func(int64))
	}
	id := w.next
	w.next++
	w.fns[id] = fn
	return func() {
		w.mu.Lock()
		delete(w.fns, id)
		w.mu.Unlock()
	}
}

func (w *sizeWatchers) changed(size int64) {
	w.mu.Lock()
	fns := make([]func(int64), 0, len(w.fns))
	for _, fn := range w.fns {
		fns = append(fns, fn)
	}
	w.mu.Unlock()
	for _, fn := range fns {
		fn(size)
	}
}
