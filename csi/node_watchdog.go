package csi

import (
	"context"
	"errors"
	"time"

	"github.com/purerbd/purerbd/nbd/kernel"
	"github.com/purerbd/purerbd/nbd/ublk"
)

// watchdog replaces a volume's device when it stops being served for a
// reason of the kernel's while this process serves it: an NBD device
// whose connections all died is reattached (kernel.Reattach), a ublk
// device whose queues ended is taken over again (ublk.Recover, the same
// image).
type watchdog struct {
	stop chan struct{}
	done chan struct{}
}

var errWatchStopped = errors.New("watchdog stopped")

// deviceReplacer replaces a device that stopped being served, retried
// until it works or fatal says the device is gone for good.
type deviceReplacer struct {
	what    string // logged when the device stopped being served
	served  string // logged when it is served again
	reason  string // the metric's reattach reason
	release func(old nodeDevice)
	try     func(ctx context.Context) (nodeDevice, error)
	fatal   func(err error) bool
}

// replacerFor returns how to replace dev, a volume's device.
func (n *NodeServer) replacerFor(v *nodeVolume, dev nodeDevice, cfg kernel.AttachConfig) deviceReplacer {
	if _, ok := dev.(ublkDevice); ok {
		n.mu.Lock()
		rec, img := *v.rec, v.img
		n.mu.Unlock()
		return deviceReplacer{
			what:    "the queues of a ublk device ended; taking it over again",
			served:  "ublk device taken over again",
			reason:  reattachConnsLost,
			release: func(old nodeDevice) { old.(ublkDevice).d.Abandon() },
			try: func(ctx context.Context) (nodeDevice, error) {
				return recoverUblkDevice(ctx, rec.Index, n.ublkConfig(img, &rec))
			},
			fatal: func(err error) bool { return errors.Is(err, ublk.ErrNoDevice) || errors.Is(err, ublk.ErrNoRecovery) },
		}
	}
	// cfg.Conns is the count the device was attached with (its record)
	return deviceReplacer{
		what:   "the kernel dropped every connection of a device; reattaching",
		served: "device reattached",
		reason: reattachConnsLost,
		release: func(old nodeDevice) {
			// Free what the dead device still holds (its netlink socket).
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			old.Release(ctx)
			cancel()
		},
		try: func(ctx context.Context) (nodeDevice, error) {
			d, err := kernel.Reattach(ctx, cfg)
			if err != nil {
				return nil, err
			}
			return d, nil
		},
		fatal: func(err error) bool {
			return errors.Is(err, kernel.ErrNoSuchDevice) || errors.Is(err, kernel.ErrNotConnected) || errors.Is(err, kernel.ErrReattachUnsupported)
		},
	}
}

// watchDevice starts the watchdog of a volume's device.
func (n *NodeServer) watchDevice(v *nodeVolume, dev nodeDevice, cfg kernel.AttachConfig) {
	w := &watchdog{stop: make(chan struct{}), done: make(chan struct{})}
	n.mu.Lock()
	if v.dev != dev {
		// Released (or replaced) since it was attached: nothing to
		// watch, and a watchdog would serve a released device again.
		n.mu.Unlock()
		return
	}
	v.watch = w
	id := v.rec.VolumeID
	n.mu.Unlock()
	r := n.replacerFor(v, dev, cfg)
	go func() {
		defer close(w.done)
		for {
			select {
			case <-w.stop:
				return
			case <-dev.Done():
			}
			select {
			case <-w.stop:
				return // Detach or Release ended the serving
			default:
			}
			obs := n.cfg.Metrics.volume(id)
			obs.stalled()
			n.log.Warn(r.what, "volumeID", id, "device", dev.Path(), "error", errString(dev.Err()))
			r.release(dev)
			next, err := n.replaceLoop(w, id, r)
			if err != nil {
				n.mu.Lock()
				if v.dev == dev {
					v.dev, v.broken = nil, err
				}
				n.mu.Unlock()
				if !errors.Is(err, errWatchStopped) {
					n.log.Error("the device of a volume is lost", "volumeID", id, "error", err.Error())
				}
				return
			}
			n.mu.Lock()
			v.dev = next
			n.mu.Unlock()
			dev = next
			obs.reattached(r.reason)
			n.log.Info(r.served, "volumeID", id, "device", dev.Path(), "conns", dev.Conns())
		}
	}()
}

// replaceLoop retries r until it works, the device is gone for good, or
// the watchdog is stopped.
func (n *NodeServer) replaceLoop(w *watchdog, id string, r deviceReplacer) (nodeDevice, error) {
	delay := 100 * time.Millisecond
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		dev, err := r.try(ctx)
		cancel()
		if err == nil {
			return dev, nil
		}
		if r.fatal(err) {
			return nil, err
		}
		n.log.Warn("serving the device again failed, retrying", "volumeID", id, "error", err.Error(), "retry_in", delay)
		select {
		case <-w.stop:
			return nil, errWatchStopped
		case <-time.After(delay):
		}
		delay = min(2*delay, 5*time.Second)
	}
}

// stopWatch stops a volume's watchdog and waits for it.
func (n *NodeServer) stopWatch(v *nodeVolume) {
	n.mu.Lock()
	w := v.watch
	v.watch = nil
	n.mu.Unlock()
	if w != nil {
		close(w.stop)
		<-w.done
	}
}
