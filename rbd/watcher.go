package rbd

import (
	"context"
	"fmt"
	"syscall"
	"time"

	"github.com/purerbd/purerbd/rbd/watchnotify"
)

// The header watch: how an open image hears about other clients
// (HEADER_UPDATE after they change the header, lock handover messages,
// requests addressed to the lock owner).

// notifyTimeout bounds how long a notify waits for acknowledgements
// (librbd's default watch notify timeout).
const notifyTimeout = 5 * time.Second

func (img *Image) startWatch(ctx context.Context) error {
	w, err := img.meta.watch(ctx, headerObject(img.id), watchCallbacks{
		notify: img.handleNotify,
		watchErr: func(err error) {
			img.log.Warn("header watch lost", "err", err)
			img.stale.Store(true)
		},
		rewatched: func(handle uint64) {
			img.log.Info("header watch re-established", "handle", handle)
			img.stale.Store(true)
			if img.lock != nil {
				img.lock.rewatched(handle)
			}
		},
	})
	if err != nil {
		return fmt.Errorf("rbd: watching header of %q: %w", img.name, err)
	}
	img.watchMu.Lock()
	img.watch = w
	img.watchMu.Unlock()
	return nil
}

// watchHandle returns the header watch's current handle (0 without a
// watch).
func (img *Image) watchHandle() uint64 {
	img.watchMu.Lock()
	defer img.watchMu.Unlock()
	if img.watch == nil {
		return 0
	}
	return img.watch.Handle()
}

// clientID is how librbd names this client in lock messages.
func (img *Image) clientID() watchnotify.ClientID {
	return watchnotify.ClientID{GID: img.meta.instanceID(), Handle: img.watchHandle()}
}

// handleNotify answers one notification. The returned payload goes into
// the acknowledgement: a ResponseMessage only for requests addressed to
// the lock owner, empty otherwise (librbd counts a non-empty reply as the
// lock owner's answer).
func (img *Image) handleNotify(ev notifyEvent) []byte {
	m, err := watchnotify.ParseNotify(ev.Payload)
	if err != nil {
		img.log.Warn("undecodable header notification", "err", err, "from", ev.NotifierGID)
		return nil
	}
	img.log.Debug("header notification", "op", m.Op, "from", ev.NotifierGID)
	switch m.Op {
	case watchnotify.OpHeaderUpdate:
		img.stale.Store(true)
		if (img.hasSizeSubscribers() || img.qos.Load() != nil) && !img.closed.Load() {
			// someone waits for size changes, or QoS limits may have
			// changed (an I/O held by the old ones would wait before it
			// looked): look now rather than at the next I/O
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				if err := img.refresh(ctx); err != nil {
					img.log.Warn("refreshing the header after an update notification", "err", err)
				}
			}()
		}
	case watchnotify.OpAcquiredLock:
		if img.lock != nil && m.Client != img.clientID() {
			img.stale.Store(true)
		}
	case watchnotify.OpReleasedLock:
		if img.lock != nil {
			img.lock.peerReleased()
		}
	case watchnotify.OpRequestLock:
		if img.lock != nil && m.Client != img.clientID() {
			return img.lock.handleRequest(m)
		}
	case watchnotify.OpAsyncProgress, watchnotify.OpAsyncComplete,
		watchnotify.OpQuiesce, watchnotify.OpUnquiesce:
		// not addressed to the lock owner: plain acknowledgement
	default:
		// maintenance requests (resize, snapshots, flatten, ...) that
		// librbd sends to the lock owner: purerbd does not run them on
		// behalf of others, so the requester asks for the lock and does
		// the work itself.
		if img.lock != nil && img.lock.isOwner() {
			return watchnotify.ResponseMessage{Result: -int32(syscall.EOPNOTSUPP)}.Marshal()
		}
	}
	return nil
}

// notifyHeader sends a notification to the header's watchers and returns
// their replies.
func (img *Image) notifyHeader(ctx context.Context, m watchnotify.NotifyMessage) ([]notifyReply, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*notifyTimeout)
	defer cancel()
	return img.meta.notify(ctx, headerObject(img.id), m.Marshal(), notifyTimeout)
}

// notifyHeaderUpdate tells other clients to re-read the header (best
// effort, as librbd).
func (img *Image) notifyHeaderUpdate(ctx context.Context) {
	if _, err := img.notifyHeader(ctx, watchnotify.NotifyMessage{Op: watchnotify.OpHeaderUpdate}); err != nil {
		img.log.Warn("header update notification failed", "err", err)
	}
}

// notifyHeaderUpdateOf notifies the watchers of another image's header.
func notifyHeaderUpdateOf(ctx context.Context, o objects, id string) {
	ctx, cancel := context.WithTimeout(ctx, 2*notifyTimeout)
	defer cancel()
	_, _ = o.notify(ctx, headerObject(id), watchnotify.NotifyMessage{Op: watchnotify.OpHeaderUpdate}.Marshal(), notifyTimeout)
}
