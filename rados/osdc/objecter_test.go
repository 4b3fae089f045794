package osdc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// checkGoroutines fails t when, after the client's cleanup, more
// goroutines run than before it started.
func checkGoroutines(t *testing.T) {
	before := runtime.NumGoroutine()
	t.Cleanup(func() {
		deadline := time.Now().Add(5 * time.Second)
		for runtime.NumGoroutine() > before {
			if time.Now().After(deadline) {
				buf := make([]byte, 1<<20)
				n := runtime.Stack(buf, true)
				t.Errorf("goroutines: %d before, %d after close:\n%s", before, runtime.NumGoroutine(), buf[:n])
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
}

func TestConcurrentRequests(t *testing.T) {
	checkGoroutines(t)
	tc := connect(t, cluster, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const workers, rounds = 48, 10
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			oid := fmt.Sprintf("conc-%d", w)
			for r := 0; r < rounds; r++ {
				data := make([]byte, 4096+rng.IntN(8192))
				for i := range data {
					data[i] = byte(rng.Uint32())
				}
				off := uint64(rng.IntN(3) * 4096)
				if _, err := tc.ob.Do(ctx, &Request{Pool: tc.pool, OID: oid, Ops: []OSDOp{Write(off, data)}}); err != nil {
					errs <- err
					return
				}
				rep, err := tc.ob.Do(ctx, &Request{Pool: tc.pool, OID: oid, Ops: []OSDOp{Read(off, uint64(len(data)))}})
				if err != nil {
					errs <- err
					return
				}
				if !bytes.Equal(rep.Ops[0].OutData, data) {
					errs <- fmt.Errorf("%s round %d: read differs", oid, r)
					return
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestListObjects(t *testing.T) {
	checkGoroutines(t)
	tc := connect(t, cluster, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	want := map[string][]string{}
	for i := 0; i < 40; i++ {
		ns := []string{"", "lst-a", "lst-b"}[i%3]
		oid := fmt.Sprintf("list-%03d", i)
		if _, err := tc.ob.Do(ctx, &Request{Pool: tc.pool, Namespace: ns, OID: oid, Ops: []OSDOp{Create(false)}}); err != nil {
			t.Fatal(err)
		}
		want[ns] = append(want[ns], oid)
	}
	list := func(ns string) []string {
		var got []string
		cur := MinHObject()
		for pages := 0; !cur.Max; pages++ {
			if pages > 100 {
				t.Fatal("listing does not end")
			}
			es, next, err := tc.ob.ListPage(ctx, tc.pool, ns, cur, 7)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range es {
				got = append(got, e.Namespace+"/"+e.OID)
			}
			cur = next
		}
		slices.Sort(got)
		return got
	}
	got := list("lst-a")
	var exp []string
	for _, o := range want["lst-a"] {
		exp = append(exp, "lst-a/"+o)
	}
	if !slices.Equal(got, exp) {
		t.Errorf("namespace lst-a: got %v, want %v", got, exp)
	}
	// every namespace, compared with the rados CLI
	got = list(AllNamespaces)
	out, err := cluster.Rados(ctx, "-p", cluster.Pool, "ls", "--all")
	if err != nil {
		t.Fatal(err)
	}
	var cli []string
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if l == "" {
			continue
		}
		ns, oid, ok := strings.Cut(l, "\t")
		if !ok {
			ns, oid = "", l
		}
		cli = append(cli, ns+"/"+oid)
	}
	slices.Sort(cli)
	if !slices.Equal(got, cli) {
		t.Errorf("all namespaces:\n got %v\nrados %v", got, cli)
	}
}

// TestPauseAndCancel: requests wait while the map pauses them, go when
// it stops, and a cancelled request leaves nothing behind.
func TestPauseAndCancel(t *testing.T) {
	checkGoroutines(t)
	tc := connect(t, cluster, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const oid = "pause-obj"
	if _, err := tc.ob.Do(ctx, &Request{Pool: tc.pool, OID: oid, Ops: []OSDOp{WriteFull([]byte("x"))}}); err != nil {
		t.Fatal(err)
	}
	setFlag := func(verb, flag string) {
		t.Helper()
		if _, err := cluster.Ceph(ctx, "osd", verb, flag); err != nil {
			t.Fatal(err)
		}
		epoch := latestEpoch(t, tc)
		if err := tc.ob.WaitForMap(ctx, epoch); err != nil {
			t.Fatal(err)
		}
	}
	// "pause" sets both PAUSERD and PAUSEWR
	setFlag("set", "pause")
	defer func() { _, _ = cluster.Ceph(context.Background(), "osd", "unset", "pause") }()

	// a write with a short deadline gives up and leaves nothing behind
	short, cancelShort := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err := tc.ob.Do(short, &Request{Pool: tc.pool, OID: oid, Ops: []OSDOp{WriteFull([]byte("never"))}})
	cancelShort()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("paused write: %v, want a deadline error", err)
	}
	if n := pending(tc.ob); n != 0 {
		t.Fatalf("%d requests left behind after cancel", n)
	}
	// a write and a read wait until the flag is cleared
	done := make(chan error, 2)
	go func() {
		_, err := tc.ob.Do(ctx, &Request{Pool: tc.pool, OID: oid, Ops: []OSDOp{WriteFull([]byte("later"))}})
		done <- err
	}()
	go func() {
		_, err := tc.ob.Do(ctx, &Request{Pool: tc.pool, OID: "pause-other", Ops: []OSDOp{Stat()}})
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("a request went through a pause: %v", err)
	case <-time.After(500 * time.Millisecond):
	}
	setFlag("unset", "pause")
	if err := <-done; err != nil && !errors.Is(err, ENOENT) {
		t.Fatalf("request after the pause: %v", err)
	}
	if err := <-done; err != nil && !errors.Is(err, ENOENT) {
		t.Fatalf("request after the pause: %v", err)
	}
	rep, err := tc.ob.Do(ctx, &Request{Pool: tc.pool, OID: oid, Ops: []OSDOp{Read(0, 0)}})
	if err != nil || string(rep.Ops[0].OutData) != "later" {
		t.Fatalf("read back: %v %q", err, rep.Ops[0].OutData)
	}
	// a request to a pool that does not exist fails, after asking the
	// monitors whether the map is current
	_, err = tc.ob.Do(ctx, &Request{Pool: 9999, OID: oid, Ops: []OSDOp{Read(0, 0)}})
	if !errors.Is(err, ErrPoolNotFound) {
		t.Fatalf("request to a missing pool: %v", err)
	}
	if n := pending(tc.ob); n != 0 {
		t.Fatalf("%d requests left behind", n)
	}
}

func latestEpoch(t *testing.T, tc *testClient) uint32 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	n, _, err := tc.mc.GetVersion(ctx, "osdmap")
	if err != nil {
		t.Fatal(err)
	}
	return uint32(n)
}

// pending counts the requests the objecter still tracks.
func pending(o *Objecter) int {
	n := 0
	o.homeMu.Lock()
	n += len(o.homeless)
	o.homeMu.Unlock()
	o.sessMu.Lock()
	for _, s := range o.sessions {
		s.mu.Lock()
		n += len(s.ops)
		s.mu.Unlock()
	}
	o.sessMu.Unlock()
	return n
}
