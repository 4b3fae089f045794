package rbd

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/purerbd/purerbd/rados"
	"github.com/purerbd/purerbd/rados/denc"
)

// radosObjects implements objects over a rados.IOContext: compound
// operations in its pool and namespace, each with the snapshot (reads)
// or snapshot context (writes) the caller gives, as librbd passes its
// own per request rather than the I/O context's. The connection's
// operation timeout bounds them, as rados_osd_op_timeout bounds
// librbd's.
type radosObjects struct {
	io *rados.IOContext
}

func adapt(io *rados.IOContext) (objects, error) {
	if io == nil {
		return nil, fmt.Errorf("%w: nil I/O context", ErrInvalid)
	}
	// RBD objects are placed by their names
	return &radosObjects{io: io.WithLocatorKey("")}, nil
}

func (r *radosObjects) read(ctx context.Context, oid string, snap uint64, op *rados.ReadOp) error {
	op.SetSnap(snap)
	return r.io.OperateRead(ctx, oid, op)
}

func (r *radosObjects) write(ctx context.Context, oid string, snapc denc.SnapContext, op *rados.WriteOp) error {
	op.SetSnapContext(snapc.Seq, snapc.Snaps)
	return r.io.OperateWrite(ctx, oid, op)
}

// radosWatch keeps a watch registered: when the cluster drops it, it
// watches again and reports the new handle.
type radosWatch struct {
	r    *radosObjects
	oid  string
	cb   watchCallbacks
	mu   sync.Mutex
	w    *rados.Watcher
	stop chan struct{}
	done chan struct{}
}

func (r *radosObjects) watch(ctx context.Context, oid string, cb watchCallbacks) (watchHandle, error) {
	w, err := r.io.Watch(ctx, oid)
	if err != nil {
		return nil, err
	}
	rw := &radosWatch{r: r, oid: oid, cb: cb, w: w, stop: make(chan struct{}), done: make(chan struct{})}
	go rw.loop()
	return rw, nil
}

func (w *radosWatch) current() *rados.Watcher {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.w
}

func (w *radosWatch) Handle() uint64 { return w.current().ID() }

func (w *radosWatch) Close(ctx context.Context) error {
	close(w.stop)
	err := w.current().Close(ctx)
	<-w.done
	return err
}

func (w *radosWatch) loop() {
	defer close(w.done)
	for {
		cur := w.current()
		var lost error
		for ev := range cur.Events() {
			if ev.Err != nil {
				lost = ev.Err
				break
			}
			reply := w.cb.notify(notifyEvent{NotifyID: ev.NotifyID, Cookie: cur.ID(), NotifierGID: ev.NotifierGID, Payload: ev.Payload})
			go func(ev rados.NotifyEvent) {
				ctx, cancel := context.WithTimeout(context.Background(), notifyTimeout)
				defer cancel()
				_ = cur.Ack(ctx, ev, reply)
			}(ev)
		}
		select {
		case <-w.stop:
			return
		default:
		}
		if lost == nil {
			lost = errors.New("watch events ended")
		}
		w.cb.watchErr(lost)
		for delay := 100 * time.Millisecond; ; delay = min(2*delay, 5*time.Second) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			_ = cur.Close(ctx)
			nw, err := w.r.io.Watch(ctx, w.oid)
			cancel()
			if errors.Is(err, rados.ErrClosed) {
				return // the connection is gone: nothing to watch with
			}
			if err == nil {
				w.mu.Lock()
				w.w = nw
				w.mu.Unlock()
				w.cb.rewatched(nw.ID())
				break
			}
			select {
			case <-w.stop:
				return
			case <-time.After(delay):
			}
		}
	}
}

func (r *radosObjects) notify(ctx context.Context, oid string, payload []byte, timeout time.Duration) ([]notifyReply, error) {
	res, err := r.io.Notify(ctx, oid, payload, timeout)
	var out []notifyReply
	if res != nil {
		for _, a := range res.Acks {
			out = append(out, notifyReply{GID: a.GID, Cookie: a.Cookie, Reply: a.Reply})
		}
	}
	return out, err
}

func (r *radosObjects) allocSnap(ctx context.Context) (uint64, error) {
	return r.io.SelfManagedSnapCreate(ctx)
}

func (r *radosObjects) releaseSnap(ctx context.Context, snap uint64) error {
	return r.io.SelfManagedSnapRemove(ctx, snap)
}

func (r *radosObjects) poolID() int64      { return r.io.Pool() }
func (r *radosObjects) namespace() string  { return r.io.Namespace() }
func (r *radosObjects) instanceID() uint64 { return r.io.Conn().InstanceID() }

func (r *radosObjects) pool(ctx context.Context, id int64, ns string) (objects, error) {
	conn := r.io.Conn()
	name, ok := conn.OSDMap().PoolNames[id]
	if !ok {
		if err := conn.WaitForLatestOSDMap(ctx); err != nil {
			return nil, err
		}
		if name, ok = conn.OSDMap().PoolNames[id]; !ok {
			return nil, fmt.Errorf("rbd: pool %d: %w", id, rados.ErrPoolNotFound)
		}
	}
	io, err := conn.IOContext(ctx, name, ns)
	if err != nil {
		return nil, err
	}
	return &radosObjects{io: io}, nil
}

func (r *radosObjects) poolByName(ctx context.Context, name string) (int64, error) {
	return r.io.Conn().LookupPool(ctx, name)
}

func (r *radosObjects) poolIDs(ctx context.Context) ([]int64, error) {
	conn := r.io.Conn()
	if err := conn.WaitForLatestOSDMap(ctx); err != nil {
		return nil, err
	}
	m := conn.OSDMap()
	var ids []int64
	for id := range m.PoolNames {
		if p := m.Pool(id); p != nil && p.TierOf >= 0 {
			continue // a cache tier: its base pool holds the objects
		}
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids, nil
}

func (r *radosObjects) blocklist(ctx context.Context, addr denc.EntityAddr) error {
	if err := r.io.Conn().Blocklist(ctx, addr, 0); err != nil {
		return fmt.Errorf("rbd: %w", err)
	}
	return nil
}

func (r *radosObjects) listWatchers(ctx context.Context, oid string) ([]watcherInfo, error) {
	ws, err := r.io.ListWatchers(ctx, oid)
	if err != nil {
		return nil, err
	}
	out := make([]watcherInfo, len(ws))
	for i, w := range ws {
		out[i] = watcherInfo{Entity: w.Name, Cookie: w.Cookie, Addr: w.Addr}
	}
	return out, nil
}
