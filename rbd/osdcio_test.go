package rbd

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/purerbd/purerbd/rados/auth"
	"github.com/purerbd/purerbd/rados/denc"
	"github.com/purerbd/purerbd/rados/monc"
	"github.com/purerbd/purerbd/rados/osdc"
)

// A stand-in for the public rados package while it is being written: the
// objects interface implemented directly over the monitor client and the
// objecter, for the tests only.

type monSource struct {
	mc *monc.Client
	mu sync.Mutex
	in bool
}

func (s *monSource) RequestOSDMap(have uint32) {
	s.mu.Lock()
	if s.in {
		s.mu.Unlock()
		return
	}
	s.in = true
	s.mu.Unlock()
	go func() {
		defer func() { s.mu.Lock(); s.in = false; s.mu.Unlock() }()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = s.mc.RequestOSDMap(ctx, 0)
	}()
}

func (s *monSource) LatestOSDMapEpoch(ctx context.Context) (uint32, error) {
	n, _, err := s.mc.GetVersion(ctx, "osdmap")
	return uint32(n), err
}

type testConn struct {
	mc *monc.Client
	ob *osdc.Objecter
}

var (
	connOnce sync.Once
	conn     *testConn
	connErr  error
)

func sharedConn() (*testConn, error) {
	connOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		key, err := auth.ParseKey(cluster.AdminKey)
		if err != nil {
			connErr = err
			return
		}
		mc, err := monc.New(ctx, monc.Config{MonAddrs: cluster.MonAddrs, Key: key})
		if err != nil {
			connErr = err
			return
		}
		ob, err := osdc.New(osdc.Config{Auth: mc.Auth(), Maps: &monSource{mc: mc}})
		if err != nil {
			connErr = err
			return
		}
		sub, err := mc.SubscribeOSDMap(0)
		if err != nil {
			connErr = err
			return
		}
		go func() {
			for m := range sub.C() {
				_ = ob.HandleOSDMap(m)
			}
		}()
		if err := ob.WaitForMap(ctx, 1); err != nil {
			connErr = err
			return
		}
		conn = &testConn{mc: mc, ob: ob}
	})
	return conn, connErr
}

type osdcPool struct {
	c  *testConn
	id int64
	ns string
}

func (p *osdcPool) rbdObjects() objects { return p }

func testPool(t *testing.T) IOContext {
	t.Helper()
	c, err := sharedConn()
	if err != nil {
		t.Fatalf("connecting: %v", err)
	}
	id, ok := c.ob.Map().PoolByName(cluster.Pool)
	if !ok {
		t.Fatalf("no pool %s", cluster.Pool)
	}
	return &osdcPool{c: c, id: id}
}

func toOSDC(o *objOp) osdc.OSDOp {
	switch o.code {
	case opRead:
		return osdc.Read(o.off, o.length)
	case opStat:
		return osdc.Stat()
	case opAssertExists:
		return osdc.AssertExists()
	case opCall:
		return osdc.Call(o.method.Class, o.method.Name, o.method.In)
	case opListWatchers:
		return osdc.ListWatchers()
	case opCreate:
		return osdc.Create(o.excl)
	case opWrite:
		return osdc.Write(o.off, o.data)
	case opWriteFull:
		return osdc.WriteFull(o.data)
	case opTruncate:
		return osdc.Truncate(o.off)
	case opZero:
		return osdc.Zero(o.off, o.length)
	case opDelete:
		return osdc.Delete()
	case opRollback:
		return osdc.Rollback(o.snap)
	}
	panic(fmt.Sprintf("op %d", o.code))
}

func (p *osdcPool) do(ctx context.Context, oid string, snap uint64, snapc denc.SnapContext, write bool, ops []*objOp) error {
	req := &osdc.Request{Pool: p.id, Namespace: p.ns, OID: oid, SnapID: snap, SnapContext: snapc}
	for _, o := range ops {
		req.Ops = append(req.Ops, toOSDC(o))
	}
	if write {
		req.Flags = osdc.FlagWrite
	} else {
		req.Flags = osdc.FlagRead
	}
	rep, err := p.c.ob.Do(ctx, req)
	if rep != nil {
		for i := range ops {
			if i < len(rep.Ops) {
				ops[i].out = rep.Ops[i].OutData
			}
		}
	}
	return err
}

func (p *osdcPool) read(ctx context.Context, oid string, snap uint64, ops ...*objOp) error {
	return p.do(ctx, oid, snap, denc.SnapContext{}, false, ops)
}

func (p *osdcPool) write(ctx context.Context, oid string, snapc denc.SnapContext, ops ...*objOp) error {
	return p.do(ctx, oid, osdc.SnapHead, snapc, true, ops)
}

type osdcWatch struct {
	p      *osdcPool
	oid    string
	cb     watchCallbacks
	mu     sync.Mutex
	w      *osdc.Watch
	closed bool
	done   chan struct{}
}

func (w *osdcWatch) Handle() uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.w.Cookie()
}

func (w *osdcWatch) Close(ctx context.Context) error {
	w.mu.Lock()
	w.closed = true
	cur := w.w
	w.mu.Unlock()
	err := cur.Close(ctx)
	<-w.done
	return err
}

func (w *osdcWatch) loop() {
	defer close(w.done)
	for {
		w.mu.Lock()
		cur := w.w
		w.mu.Unlock()
		for ev := range cur.Events() {
			if ev.Err != nil {
				w.cb.watchErr(ev.Err)
				break
			}
			reply := w.cb.notify(notifyEvent{NotifyID: ev.NotifyID, Cookie: cur.Cookie(), NotifierGID: ev.NotifierGID, Payload: ev.Payload})
			go func(id uint64) {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				_ = cur.Ack(ctx, id, reply)
			}(ev.NotifyID)
		}
		w.mu.Lock()
		if w.closed {
			w.mu.Unlock()
			return
		}
		w.mu.Unlock()
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			_ = cur.Close(ctx)
			nw, err := w.p.c.ob.Watch(ctx, osdc.WatchRequest{Pool: w.p.id, Namespace: w.p.ns, OID: w.oid})
			cancel()
			if err == nil {
				w.mu.Lock()
				w.w = nw
				w.mu.Unlock()
				w.cb.rewatched(nw.Cookie())
				break
			}
			time.Sleep(time.Second)
		}
	}
}

func (p *osdcPool) watch(ctx context.Context, oid string, cb watchCallbacks) (watchHandle, error) {
	w, err := p.c.ob.Watch(ctx, osdc.WatchRequest{Pool: p.id, Namespace: p.ns, OID: oid})
	if err != nil {
		return nil, err
	}
	ow := &osdcWatch{p: p, oid: oid, cb: cb, w: w, done: make(chan struct{})}
	go ow.loop()
	return ow, nil
}

func (p *osdcPool) notify(ctx context.Context, oid string, payload []byte, timeout time.Duration) ([]notifyReply, error) {
	res, err := p.c.ob.Notify(ctx, osdc.NotifyRequest{Pool: p.id, Namespace: p.ns, OID: oid, Payload: payload, Timeout: timeout})
	var out []notifyReply
	if res != nil {
		for _, a := range res.Acks {
			out = append(out, notifyReply{GID: a.GID, Cookie: a.Cookie, Reply: a.Reply})
		}
	}
	return out, err
}

var errNoSnaps = errors.New("self-managed snapshots need the rados package")

func (p *osdcPool) allocSnap(ctx context.Context) (uint64, error)      { return 0, errNoSnaps }
func (p *osdcPool) releaseSnap(ctx context.Context, snap uint64) error { return errNoSnaps }
func (p *osdcPool) poolID() int64                                      { return p.id }
func (p *osdcPool) namespace() string                                  { return p.ns }
func (p *osdcPool) instanceID() uint64                                 { return p.c.mc.GlobalID() }
func (p *osdcPool) pool(ctx context.Context, id int64, ns string) (objects, error) {
	return &osdcPool{c: p.c, id: id, ns: ns}, nil
}
func (p *osdcPool) poolByName(ctx context.Context, name string) (int64, error) {
	id, ok := p.c.ob.Map().PoolByName(name)
	if !ok {
		return 0, fmt.Errorf("no pool %q", name)
	}
	return id, nil
}
