package rbd

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/purerbd/purerbd/rbd/internal/cls"
)

// QoS as librbd applies it: limits on the operations and bytes per
// second an open image sends, from the rbd_qos_* options in the image's
// metadata (conf_rbd_qos_*, what `rbd config image set` writes) or in its
// pool's (rbd_info, `rbd config pool set`), the image's overriding the
// pool's. Every read, write and discard takes one operation and its
// length in bytes from each limit that applies (total, and read or
// write); flushes are free. A limit refills continuously at its rate and
// holds Burst×BurstSeconds (or one second at the rate, without a burst)
// for an idle image to spend at once. The limits are read at open and
// again after each header notification (`rbd config image set` sends
// one), so a change applies to an open image within a round trip.

// QoSLimit is one of librbd's throttles: Limit per second, with a burst.
type QoSLimit struct {
	Limit        uint64 // per second; 0: no limit
	Burst        uint64 // per second while the bucket lasts; 0: Limit
	BurstSeconds uint64 // how long a burst lasts (librbd's default 1)
}

// QoS are an image's limits; the zero value limits nothing.
type QoS struct {
	IOPS, ReadIOPS, WriteIOPS QoSLimit
	BPS, ReadBPS, WriteBPS    QoSLimit
}

// qosOptions names each limit as librbd's options do (rbd_qos_NAME_limit,
// _burst, _burst_seconds).
func (q *QoS) qosOptions() map[string]*QoSLimit {
	return map[string]*QoSLimit{"iops": &q.IOPS, "read_iops": &q.ReadIOPS, "write_iops": &q.WriteIOPS,
		"bps": &q.BPS, "read_bps": &q.ReadBPS, "write_bps": &q.WriteBPS}
}

// metaConfPrefix starts the metadata keys of librbd options.
const metaConfPrefix = "conf_"

// parseQoS reads the rbd_qos_* options of metadata (keys conf_OPTION).
// An option librbd would reject (not a number, a burst below its limit,
// no burst seconds) leaves its limit off, as librbd does, and is named
// in the error; the other limits apply.
func parseQoS(meta map[string]string) (QoS, error) {
	var q QoS
	var errs []error
	for name, l := range q.qosOptions() {
		l.BurstSeconds = 1
		bad := false
		for suffix, p := range map[string]*uint64{"_limit": &l.Limit, "_burst": &l.Burst, "_burst_seconds": &l.BurstSeconds} {
			key := metaConfPrefix + "rbd_qos_" + name + suffix
			v, ok := meta[key]
			if !ok {
				continue
			}
			n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
			if err != nil {
				errs = append(errs, fmt.Errorf("%w: metadata %s=%q: not a number", ErrInvalid, key, v))
				bad = true
				continue
			}
			*p = n
		}
		switch {
		case l.Burst != 0 && l.Burst < l.Limit:
			errs = append(errs, fmt.Errorf("%w: rbd_qos_%s_burst %d is below its limit %d", ErrInvalid, name, l.Burst, l.Limit))
			bad = true
		case l.BurstSeconds == 0:
			errs = append(errs, fmt.Errorf("%w: rbd_qos_%s_burst_seconds is 0", ErrInvalid, name))
			bad = true
		}
		if bad {
			*l = QoSLimit{BurstSeconds: 1}
		}
	}
	return q, errors.Join(errs...)
}

// qosState is the throttles of one set of limits; done closes when
// other limits replace them, releasing whoever waits.
type qosState struct {
	limits                    QoS
	iops, readIOPS, writeIOPS *tokenBucket
	bps, readBPS, writeBPS    *tokenBucket
	done                      chan struct{}
}

func newQoSState(q QoS, now func() time.Time) *qosState {
	return &qosState{limits: q,
		iops: newTokenBucket(q.IOPS, now), readIOPS: newTokenBucket(q.ReadIOPS, now), writeIOPS: newTokenBucket(q.WriteIOPS, now),
		bps: newTokenBucket(q.BPS, now), readBPS: newTokenBucket(q.ReadBPS, now), writeBPS: newTokenBucket(q.WriteBPS, now),
		done: make(chan struct{})}
}

// errQoSReplaced is take's answer when the limits changed while it
// waited: the caller starts again with the new ones.
var errQoSReplaced = errors.New("rbd: qos limits replaced")

// take waits until the operation (write or read, n bytes) fits its
// limits.
func (s *qosState) take(ctx context.Context, write bool, n int64) error {
	ops, bytes := s.readIOPS, s.readBPS
	if write {
		ops, bytes = s.writeIOPS, s.writeBPS
	}
	for _, t := range []struct {
		b *tokenBucket
		n float64
	}{{s.iops, 1}, {ops, 1}, {s.bps, float64(n)}, {bytes, float64(n)}} {
		if err := t.b.take(ctx, t.n, s.done); err != nil {
			return err
		}
	}
	return nil
}

// throttle waits for the image's QoS limits to let an operation of n
// bytes through.
func (img *Image) throttle(ctx context.Context, write bool, n int64) error {
	for {
		s := img.qos.Load()
		if s == nil {
			return nil
		}
		err := s.take(ctx, write, n)
		if !errors.Is(err, errQoSReplaced) {
			return err
		}
	}
}

// QoS returns the limits the image applies.
func (img *Image) QoS() QoS {
	if s := img.qos.Load(); s != nil {
		return s.limits
	}
	return QoS{}
}

// loadQoS reads the pool's and the image's rbd_qos_* options and, when
// they changed, replaces the throttles.
func (img *Image) loadQoS(ctx context.Context) error {
	img.qosMu.Lock()
	defer img.qosMu.Unlock()
	meta, err := metadataListOf(ctx, img.meta, infoObject)
	if err != nil && !errors.Is(err, syscall.ENOENT) {
		return fmt.Errorf("rbd: pool metadata: %w", err)
	}
	if meta == nil {
		meta = map[string]string{}
	}
	imgMeta, err := metadataListOf(ctx, img.meta, headerObject(img.id))
	if err != nil {
		return fmt.Errorf("rbd: image metadata: %w", err)
	}
	for k, v := range imgMeta {
		meta[k] = v
	}
	q, err := parseQoS(meta)
	if err != nil {
		// as librbd, which logs a bad option and applies the others
		img.log.Warn("image qos options ignored", "image", img.name, "err", err)
	}
	old := img.qos.Load()
	if old != nil && old.limits == q || old == nil && q == (QoS{}) {
		return nil
	}
	var s *qosState
	if q != (QoS{}) {
		s = newQoSState(q, time.Now)
		img.log.Info("qos limits", "image", img.name, "limits", fmt.Sprintf("%+v", q))
	}
	img.qos.Store(s)
	if old != nil {
		close(old.done)
	}
	return nil
}

// metadataListOf lists the metadata held by object oid (an image header,
// or rbd_info for the pool's).
func metadataListOf(ctx context.Context, o objects, oid string) (map[string]string, error) {
	out := map[string]string{}
	start := ""
	for {
		reply, err := call(ctx, o, oid, cls.MetadataList(start, 512))
		if err != nil {
			return nil, err
		}
		kvs, err := cls.DecodeMetadataList(reply)
		if err != nil {
			return nil, err
		}
		for _, kv := range kvs {
			out[kv.Key] = string(kv.Value)
		}
		if len(kvs) < 512 {
			return out, nil
		}
		start = kvs[len(kvs)-1].Key
	}
}

// tokenBucket is one throttle: tokens refill at rate per second up to
// capacity; take waits until the bucket holds what it asks (or, for more
// than the bucket holds, until it is full), then spends it, possibly
// into debt that later operations wait out. A nil bucket limits nothing.
type tokenBucket struct {
	mu       sync.Mutex
	rate     float64
	capacity float64
	tokens   float64
	last     time.Time
	now      func() time.Time
}

func newTokenBucket(l QoSLimit, now func() time.Time) *tokenBucket {
	if l.Limit == 0 {
		return nil
	}
	capacity := float64(l.Limit)
	if l.Burst > 0 {
		capacity = float64(l.Burst) * float64(l.BurstSeconds)
	}
	return &tokenBucket{rate: float64(l.Limit), capacity: capacity, tokens: capacity, last: now(), now: now}
}

// reserve spends n tokens if the bucket holds enough, or returns how
// long until it does.
func (b *tokenBucket) reserve(n float64) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	b.tokens = min(b.capacity, b.tokens+b.rate*now.Sub(b.last).Seconds())
	b.last = now
	need := min(n, b.capacity)
	if b.tokens >= need {
		b.tokens -= n
		return 0
	}
	return time.Duration((need - b.tokens) / b.rate * float64(time.Second))
}

func (b *tokenBucket) take(ctx context.Context, n float64, replaced <-chan struct{}) error {
	if b == nil {
		return nil
	}
	for {
		wait := b.reserve(n)
		if wait == 0 {
			return nil
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-replaced:
			t.Stop()
			return errQoSReplaced
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
	}
}
