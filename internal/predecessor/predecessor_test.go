package predecessor

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/purerbd/purerbd/rados/denc"
)

const childEnv = "PREDECESSOR_TEST_CHILD"

func addr(nonce uint32) denc.EntityAddr {
	return denc.NewEntityAddr(denc.AddrAny, netip.MustParseAddrPort("10.1.2.3:0"), nonce)
}

// TestMain lets the test binary play the predecessor: with childEnv set
// it takes the role, records two clients, says so and waits to be
// killed.
func TestMain(m *testing.M) {
	if path := os.Getenv(childEnv); path != "" {
		c, err := Take(context.Background(), path, nil)
		if err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		_ = c.Record("fsid-a", addr(11))
		_ = c.Record("fsid-b", addr(12))
		c = nil
		runtime.GC() // the role outlives its Claim value: only death ends it
		runtime.GC()
		fmt.Println("ready")
		time.Sleep(time.Hour) // until killed (a bare select{} would be a deadlock the runtime ends)
	}
	os.Exit(m.Run())
}

// startChild runs the predecessor and waits until it holds the role.
func startChild(t *testing.T, path string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+path)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || line != "ready\n" {
		t.Fatalf("child: %q %v", line, err)
	}
	return cmd
}

// TestLiveHolderBlocksDeadHolderFrees: while the predecessor lives the
// role cannot be taken; once it is SIGKILLed it can at once, and its
// recorded clients are known, per cluster.
func TestLiveHolderBlocksDeadHolderFrees(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "node.lock")
	child := startChild(t, path)

	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if c, err := Take(ctx, path, nil); err == nil {
		c.Close()
		t.Fatal("took the role while its holder lives")
	} else if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("want a deadline error, got %v", err)
	}

	if err := child.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = child.Wait()
	c, err := Take(context.Background(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got := c.Predecessors("fsid-a"); len(got) != 1 || !got[0].SameInstance(addr(11)) {
		t.Errorf("predecessors on fsid-a: %v", got)
	}
	if got := c.Predecessors("fsid-b"); len(got) != 1 || !got[0].SameInstance(addr(12)) {
		t.Errorf("predecessors on fsid-b: %v", got)
	}
	if got := c.Predecessors("fsid-c"); len(got) != 0 {
		t.Errorf("predecessors on fsid-c: %v", got)
	}
}

// TestInheritedUntilExpired: a successor that dies before it fenced
// anything still passes its predecessor's clients on; clients older than
// the blocklist expiry are dropped; Forget removes a cleanly closed one.
func TestInheritedUntilExpired(t *testing.T) {
	path := filepath.Join(t.TempDir(), "node.lock")
	old := record{Version: recordVersion, PID: 1, Clients: []Client{
		{FSID: "f", Addr: addr(1).String(), Since: time.Now().Add(-2 * inheritFor)},
		{FSID: "f", Addr: addr(2).String(), Since: time.Now().Add(-time.Minute)},
	}}
	c0 := &Claim{lock: -1, record: path + ".clients", rec: old}
	if err := c0.writeLocked(); err != nil {
		t.Fatal(err)
	}
	c1, err := Take(context.Background(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := c1.Record("f", addr(3)); err != nil {
		t.Fatal(err)
	}
	if err := c1.Record("f", addr(4)); err != nil {
		t.Fatal(err)
	}
	if err := c1.Forget("f", addr(4)); err != nil {
		t.Fatal(err)
	}
	c1.Close() // dies without fencing
	c2, err := Take(context.Background(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	got := c2.Predecessors("f")
	if len(got) != 2 || !got[0].SameInstance(addr(3)) && !got[1].SameInstance(addr(3)) ||
		!got[0].SameInstance(addr(2)) && !got[1].SameInstance(addr(2)) {
		t.Errorf("predecessors %v, want nonces 3 and 2 (1 expired, 4 forgotten)", got)
	}
}

// TestUnreadableRecord: a torn or foreign record costs the fast path,
// never the role.
func TestUnreadableRecord(t *testing.T) {
	path := filepath.Join(t.TempDir(), "node.lock")
	if err := os.WriteFile(path+".clients", []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Take(context.Background(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got := c.Predecessors("f"); len(got) != 0 {
		t.Errorf("predecessors from a torn record: %v", got)
	}
}

type fakeConn struct {
	fsid   string
	self   denc.EntityAddr
	mu     sync.Mutex
	listed []denc.EntityAddr
	calls  atomic.Int32
	refuse uint32        // nonce whose blocklisting fails
	gate   chan struct{} // when set, blocklisting waits for it to close
}

func (f *fakeConn) FSID() string                { return f.fsid }
func (f *fakeConn) ClientAddr() denc.EntityAddr { return f.self }
func (f *fakeConn) Blocklist(ctx context.Context, a denc.EntityAddr, _ time.Duration) error {
	f.calls.Add(1)
	time.Sleep(20 * time.Millisecond)
	if f.gate != nil {
		select {
		case <-f.gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if a.Nonce == f.refuse {
		return errors.New("EACCES")
	}
	f.mu.Lock()
	f.listed = append(f.listed, a)
	f.mu.Unlock()
	return nil
}

// takeAfter writes a dead holder's record naming clients and takes the
// role after it; the role is released when the test ends.
func takeAfter(t *testing.T, clients ...Client) (*Claim, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "node.lock")
	c0 := &Claim{lock: -1, record: path + ".clients", rec: record{Version: recordVersion, Clients: clients}}
	if err := c0.writeLocked(); err != nil {
		t.Fatal(err)
	}
	c, err := Take(context.Background(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, path
}

// TestAdopt: the first connection to a cluster fences its predecessors
// once (concurrent adopters wait for it and get the same answer), a
// failed blocklisting is left out and reported, and the adopted
// connection is recorded before anything else.
func TestAdopt(t *testing.T) {
	c, path := takeAfter(t,
		Client{FSID: "f", Addr: addr(5).String(), Since: time.Now()},
		Client{FSID: "f", Addr: addr(6).String(), Since: time.Now()},
		Client{FSID: "g", Addr: addr(7).String(), Since: time.Now()})
	conn := &fakeConn{fsid: "f", self: addr(9), refuse: 6}
	var wg sync.WaitGroup
	results := make([][]denc.EntityAddr, 4)
	errs := make([]error, 4)
	for i := range results {
		wg.Go(func() { results[i], errs[i] = c.Adopt(context.Background(), conn) })
	}
	wg.Wait()
	for i := range results {
		if len(results[i]) != 1 || !results[i][0].SameInstance(addr(5)) || errs[i] == nil {
			t.Errorf("adopter %d: %v %v, want nonce 5 fenced and nonce 6's failure", i, results[i], errs[i])
		}
	}
	rec, err := readRecord(path + ".clients")
	if err != nil || len(rec.Clients) != 1 || rec.Clients[0].Addr != addr(9).String() {
		t.Errorf("record %+v %v: want the adopted connection", rec, err)
	}
	// the failure is retried by the next adopter
	conn.refuse = 0
	got, err := c.Adopt(context.Background(), conn)
	if err != nil || len(got) != 2 {
		t.Errorf("second adoption: %v %v", got, err)
	}
}

// TestAdoptAsync: the connection is recorded before AdoptAsync returns,
// while the fencing is still under way (the monitors have not committed
// it); the fencing outlives the caller's context, and the wait gives
// the fenced addresses once it is done, or the wait's own context's end.
func TestAdoptAsync(t *testing.T) {
	c, path := takeAfter(t, Client{FSID: "f", Addr: addr(5).String(), Since: time.Now()})
	conn := &fakeConn{fsid: "f", self: addr(9), gate: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	wait, err := c.AdoptAsync(ctx, conn)
	cancel() // a caller that only connected
	if err != nil {
		t.Fatal(err)
	}
	rec, err := readRecord(path + ".clients")
	if err != nil || len(rec.Clients) != 1 || rec.Clients[0].Addr != addr(9).String() {
		t.Errorf("record %+v %v: want the adopted connection before the fencing ends", rec, err)
	}
	short, cancelShort := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancelShort()
	if got, err := wait(short); !errors.Is(err, context.DeadlineExceeded) || got != nil {
		t.Errorf("wait before the fencing ended: %v %v, want the wait's deadline", got, err)
	}
	close(conn.gate)
	got, err := wait(context.Background())
	if err != nil || len(got) != 1 || !got[0].SameInstance(addr(5)) {
		t.Errorf("wait: %v %v, want nonce 5 fenced", got, err)
	}
}

// TestReplacedLockFile: an operator deletes the lock file while its
// holder runs; the next process locks a new file, and must not trust the
// record the live holder wrote (it would fence a live client).
func TestReplacedLockFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "node.lock")
	live, err := Take(context.Background(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	if err := live.Record("f", addr(21)); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	next, err := Take(context.Background(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer next.Close()
	if got := next.Predecessors("f"); len(got) != 0 {
		t.Fatalf("fencing %v: the record of a live holder under a replaced lock file was trusted", got)
	}
}

// TestSettle: once a process took everything over, its successor fences
// only that process' own clients, not the generations before.
func TestSettle(t *testing.T) {
	path := filepath.Join(t.TempDir(), "node.lock")
	c0 := &Claim{lock: -1, record: path + ".clients", rec: record{Version: recordVersion, Clients: []Client{
		{FSID: "f", Addr: addr(31).String(), Since: time.Now()},
	}}}
	if err := c0.writeLocked(); err != nil {
		t.Fatal(err)
	}
	c1, err := Take(context.Background(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := c1.Record("f", addr(32)); err != nil {
		t.Fatal(err)
	}
	if got := c1.Predecessors("f"); len(got) != 1 || !got[0].SameInstance(addr(31)) {
		t.Fatalf("predecessors before settling: %v", got)
	}
	if err := c1.Settle(); err != nil {
		t.Fatal(err)
	}
	c1.Close()
	c2, err := Take(context.Background(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if got := c2.Predecessors("f"); len(got) != 1 || !got[0].SameInstance(addr(32)) {
		t.Fatalf("after a settled predecessor: %v, want only its own client (nonce 32)", got)
	}
}
