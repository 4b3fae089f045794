package rados

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/purerbd/purerbd/rados/radostest"
)

// faultObject is what a worker knows an object holds: exactly what the
// cluster acknowledged.
type faultObject struct {
	name string
	data []byte
	omap map[string][]byte
}

// TestSurvivesOSDRestartsAndSplit runs a write/append/read workload on a
// 3-OSD bluestore cluster while OSDs are killed and restarted twice and
// the pool's pg_num grows: no acknowledged write may be lost, every read
// must return exactly what was acknowledged, and no request may hang.
func TestSurvivesOSDRestartsAndSplit(t *testing.T) {
	c := radostest.New(t, radostest.Options{Mons: 1, OSDs: 3, WithMgr: true, ObjectStore: radostest.StoreBluestore,
		// OSDs then answer requests for peering PGs with MOSDBackoff
		Conf: map[string]string{"osd_backoff_on_peering": "true"}})
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	conn, err := Connect(ctx, Config{MonHost: c.MonHost(), Key: c.AdminKey})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	io, err := conn.IOContext(ctx, c.Pool, "")
	if err != nil {
		t.Fatal(err)
	}
	// a watch that must survive everything
	if err := io.Create(ctx, "fault-watched", false); err != nil {
		t.Fatal(err)
	}
	w, err := io.Watch(ctx, "fault-watched")
	if err != nil {
		t.Fatal(err)
	}
	notified := make(chan string, 16)
	go func() {
		for ev := range w.Events() {
			if ev.Err != nil {
				t.Errorf("watch lost: %v", ev.Err)
				continue
			}
			_ = w.Ack(ctx, ev, nil)
			notified <- string(ev.Payload)
		}
	}()

	const workers, perWorker = 16, 4
	stop := make(chan struct{})
	var ops, maxLatency atomic.Int64
	var wg sync.WaitGroup
	objects := make([][]*faultObject, workers)
	errs := make(chan error, workers)
	for wk := 0; wk < workers; wk++ {
		for i := 0; i < perWorker; i++ {
			objects[wk] = append(objects[wk], &faultObject{name: fmt.Sprintf("fault-%02d-%d", wk, i), omap: map[string][]byte{}})
		}
		wg.Add(1)
		go func(wk int) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(wk), 99))
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				o := objects[wk][rng.IntN(perWorker)]
				opCtx, opCancel := context.WithTimeout(ctx, 45*time.Second)
				t0 := time.Now()
				err := faultStep(opCtx, io, o, rng, n)
				opCancel()
				if d := time.Since(t0); int64(d) > maxLatency.Load() {
					maxLatency.Store(int64(d))
				}
				if err != nil {
					errs <- fmt.Errorf("worker %d, %s, step %d: %w", wk, o.name, n, err)
					return
				}
				ops.Add(1)
			}
		}(wk)
	}

	t0 := time.Now()
	at := func(d time.Duration) {
		if s := d - time.Since(t0); s > 0 {
			select {
			case <-time.After(s):
			case <-ctx.Done():
			}
		}
	}
	step := func(what string, f func() error) {
		t.Logf("%5.1fs %s (%d ops so far)", time.Since(t0).Seconds(), what, ops.Load())
		if err := f(); err != nil {
			t.Errorf("%s: %v", what, err)
		}
	}
	at(2 * time.Second)
	step("kill osd.0", func() error { return c.Kill("osd.0") })
	at(8 * time.Second)
	step("restart osd.0", func() error { return c.Start("osd.0") })
	at(11 * time.Second)
	step("pg_num 16 -> 32", func() error {
		_, err := c.Ceph(ctx, "osd", "pool", "set", c.Pool, "pg_num", "32")
		return err
	})
	at(17 * time.Second)
	step("kill osd.2", func() error { return c.Kill("osd.2") })
	at(23 * time.Second)
	step("restart osd.2", func() error { return c.Start("osd.2") })
	at(30 * time.Second)
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	pool := conn.OSDMap().Pool(io.Pool())
	st := conn.ob.Stats()
	t.Logf("%d operations, slowest %v; map epoch %d, pg_num %d (pgp_num %d); objecter: %+v", ops.Load(),
		time.Duration(maxLatency.Load()).Round(time.Millisecond), conn.OSDMap().Epoch, pool.PGNum, pool.PGPNum, st)
	if st.Resends == 0 || st.SessionResets == 0 || st.Reconnects == 0 {
		t.Errorf("the faults did not show in the objecter's counters: %+v", st)
	}
	if t.Failed() {
		return
	}
	if err := c.WaitOSDsUp(ctx); err != nil {
		t.Fatal(err)
	}
	// every acknowledged byte is there, for us and for the rados CLI
	for wk := range objects {
		for _, o := range objects[wk] {
			got, err := io.ReadAll(ctx, o.name)
			if err != nil && !(len(o.data) == 0 && len(o.omap) == 0) {
				t.Errorf("%s: %v", o.name, err)
				continue
			}
			if !bytes.Equal(got, o.data) {
				t.Errorf("%s: %d bytes read back, %d acknowledged, differ", o.name, len(got), len(o.data))
			}
			if len(o.omap) > 0 {
				m, err := io.OmapGetAll(ctx, o.name, "")
				if err != nil || len(m) != len(o.omap) {
					t.Errorf("%s: omap %d keys, want %d (%v)", o.name, len(m), len(o.omap), err)
				}
			}
		}
	}
	for _, o := range []*faultObject{objects[0][0], objects[7][1], objects[15][3]} {
		out, err := c.Rados(ctx, "-p", c.Pool, "get", o.name, "-")
		if err != nil || !bytes.Equal(out, o.data) {
			t.Errorf("rados get %s: %d bytes (%v), want %d", o.name, len(out), err, len(o.data))
		}
	}
	// placement after the split, against `ceph osd map`
	if err := conn.WaitForLatestOSDMap(ctx); err != nil {
		t.Fatal(err)
	}
	for _, o := range objects[3] {
		out, err := c.Ceph(ctx, "osd", "map", c.Pool, o.name, "-f", "json")
		if err != nil {
			t.Fatal(err)
		}
		var m struct {
			PGID   string  `json:"pgid"`
			Acting []int32 `json:"acting"`
			Epoch  uint32  `json:"epoch"`
		}
		if err := json.Unmarshal(out, &m); err != nil {
			t.Fatal(err)
		}
		if err := conn.ob.WaitForMap(ctx, m.Epoch); err != nil {
			t.Fatal(err)
		}
		loc, err := io.Locate(o.name)
		if err != nil {
			t.Fatal(err)
		}
		if loc.Epoch == m.Epoch && (loc.PG.String() != m.PGID || !slices.Equal(loc.Acting, m.Acting)) {
			t.Errorf("%s at epoch %d: ours %s %v, ceph osd map %s %v", o.name, m.Epoch, loc.PG, loc.Acting, m.PGID, m.Acting)
		}
	}
	// the watch is still registered: a notify reaches it
	if _, err := c.Rados(ctx, "-p", c.Pool, "notify", "fault-watched", "still-there"); err != nil {
		t.Fatalf("notify after the faults: %v", err)
	}
	select {
	case p := <-notified:
		if p != "\x0b\x00\x00\x00still-there" {
			t.Errorf("notify payload %q", p)
		}
	case <-ctx.Done():
		t.Fatal("the watch did not get the notify")
	}
	if err := w.Close(ctx); err != nil {
		t.Error(err)
	}
}

// faultStep does one random operation on o and checks or records the
// outcome.
func faultStep(ctx context.Context, io *IOContext, o *faultObject, rng *rand.Rand, n int) error {
	switch k := rng.IntN(10); {
	case k < 4: // write at an offset
		data := randomBytes(rng.Uint64(), 1024+rng.IntN(16<<10))
		off := rng.IntN(128 << 10)
		if err := io.Write(ctx, o.name, data, uint64(off)); err != nil {
			return err
		}
		if need := off + len(data); need > len(o.data) {
			o.data = append(o.data, make([]byte, need-len(o.data))...)
		}
		copy(o.data[off:], data)
	case k < 6: // append: a resend applied twice would show
		rec := []byte(fmt.Sprintf("[%s #%06d]", o.name, n))
		if err := io.Append(ctx, o.name, rec); err != nil {
			return err
		}
		o.data = append(o.data, rec...)
	case k < 7: // omap
		key := "k" + strconv.Itoa(n)
		val := []byte(strconv.Itoa(rng.Int()))
		if err := io.OmapSet(ctx, o.name, map[string][]byte{key: val}); err != nil {
			return err
		}
		o.omap[key] = val
	default: // read back everything acknowledged
		got, err := io.ReadAll(ctx, o.name)
		if err != nil {
			if len(o.data) == 0 && len(o.omap) == 0 && isNotFound(err) {
				return nil
			}
			return err
		}
		if !bytes.Equal(got, o.data) {
			return fmt.Errorf("read %d bytes, %d acknowledged, contents differ", len(got), len(o.data))
		}
	}
	return nil
}

func isNotFound(err error) bool { return errors.Is(err, ErrNotFound) }
