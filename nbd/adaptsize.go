package nbd

import "context"

// What Adapt returns when the wrapped value can change size or report
// size changes: the adapted backend plus Resizer and/or SizeNotifier, so
// that users of the Backend (the kernel attach, which resizes the device
// and follows size changes) find them by type assertion as they would on
// the value itself.

// adaptedValue is implemented by every Backend Adapt makes.
type adaptedValue interface{ adaptedBase() *adapted }

func (a *adapted) adaptedBase() *adapted { return a }

type adaptedNotifier struct{ *adapted }

func (a adaptedNotifier) NotifySize(fn func(size int64)) (cancel func()) {
	return a.inner.(SizeNotifier).NotifySize(fn)
}

type adaptedResizer struct{ *adapted }

func (a adaptedResizer) Resize(ctx context.Context, size int64) error {
	return a.inner.(Resizer).Resize(ctx, size)
}

type adaptedResizeNotifier struct{ *adapted }

func (a adaptedResizeNotifier) NotifySize(fn func(size int64)) (cancel func()) {
	return a.inner.(SizeNotifier).NotifySize(fn)
}

func (a adaptedResizeNotifier) Resize(ctx context.Context, size int64) error {
	return a.inner.(Resizer).Resize(ctx, size)
}

// withSizeAbilities returns a, extended by the size methods its inner
// value has.
func withSizeAbilities(a *adapted) Backend {
	_, notifies := a.inner.(SizeNotifier)
	_, resizes := a.inner.(Resizer)
	switch {
	case notifies && resizes:
		return adaptedResizeNotifier{a}
	case notifies:
		return adaptedNotifier{a}
	case resizes:
		return adaptedResizer{a}
	}
	return a
}
