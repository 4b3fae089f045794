package monc

import (
	"context"
	"testing"
	"time"

	"github.com/purerbd/purerbd/rados/radostest"
)

// TestFailover runs a client against three monitors and takes away the
// one it uses: killed, then back, then frozen (SIGSTOP, so only
// keepalives can tell). Commands and requests keep being answered, the osdmap
// subscription carries on, and the failover times are logged.
func TestFailover(t *testing.T) {
	t.Parallel()
	// short leases: the surviving monitors notice a lost leader and elect
	// a new one in a few seconds instead of ten or more
	cl := radostest.New(t, radostest.Options{Mons: 3, Pool: "-",
		Conf: map[string]string{"mon_lease": "1", "mon_election_timeout": "2"}})
	cfg := adminConfig(t, cl)
	// only mon.a is configured: the others are found in the MonMap
	cfg.MonAddrs = cl.MonAddrs[:1]
	cfg.KeepaliveInterval = 500 * time.Millisecond
	cfg.LivenessTimeout = 3 * time.Second
	cfg.HuntAttemptTimeout = time.Second
	c := connect(t, cfg)
	ctx := testContext(t, 3*time.Minute)
	sub, err := c.SubscribeOSDMap(0)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	nextOSDMap(t, sub, 10*time.Second)

	status := func(what string) time.Duration {
		t.Helper()
		cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		defer cancel()
		t0 := time.Now()
		if _, outs, err := c.CommandJSON(cctx, map[string]any{"prefix": "status", "format": "json"}, nil); err != nil {
			t.Fatalf("%s: status: %v (%s)", what, err, outs)
		}
		return time.Since(t0)
	}
	// changeOSDMap makes a new osdmap epoch (a flag, not a pool: pool
	// creation runs a crush smoke test bounded by the short mon_lease)
	// and waits for it on the subscription.
	changeOSDMap := func(prefix string) {
		t.Helper()
		if _, outs, err := c.CommandJSON(ctx, map[string]any{"prefix": prefix, "key": "noscrub"}, nil); err != nil {
			t.Fatalf("%s noscrub: %v (%s)", prefix, err, outs)
		}
		want := cliOSDMapEpoch(t, func(args ...string) ([]byte, error) { return cl.Ceph(ctx, args...) })
		waitOSDMapEpoch(t, sub, want, 30*time.Second)
	}
	status("before")
	first := c.Session()
	if first.Mon != "a" || len(c.MonMap().Mons) != 3 {
		t.Fatalf("session %+v, monmap %v", first, c.MonMap())
	}

	// 1. the monitor in use is killed
	if err := cl.Kill("mon." + first.Mon); err != nil {
		t.Fatal(err)
	}
	answered := status("after kill")
	after := c.Session()
	if after.Mon == first.Mon || after.Sessions < 2 || !after.Connected {
		t.Fatalf("after killing mon.%s: session %+v", first.Mon, after)
	}
	t.Logf("mon.%s killed: new session with mon.%s after %v; first command answered after %v",
		first.Mon, after.Mon, after.LastFailover.Round(time.Millisecond), answered.Round(time.Millisecond))
	t0 := time.Now()
	changeOSDMap("osd set")
	t.Logf("osdmap changed and received in %v", time.Since(t0).Round(time.Millisecond))
	if after.GlobalID != first.GlobalID {
		t.Errorf("global id changed across failover: %d -> %d", first.GlobalID, after.GlobalID)
	}

	// 2. it comes back: the client keeps working through the election
	t0 = time.Now()
	if err := cl.Start("mon." + first.Mon); err != nil {
		t.Fatal(err)
	}
	if err := cl.WaitQuorum(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("mon.%s back in quorum after %v; command answered in %v", first.Mon, time.Since(t0).Round(time.Millisecond), status("after restart").Round(time.Millisecond))

	// 3. the monitor in use freezes: only the keepalives notice
	frozen := c.Session()
	if err := cl.Pause("mon." + frozen.Mon); err != nil {
		t.Fatal(err)
	}
	// a request (a pool operation, answered by tid) sent to the frozen
	// monitor along with the command is sent again to the next one
	requested := make(chan error, 1)
	go func() { requested <- askMissingPool(ctx, c) }()
	answered = status("after freeze")
	if err := <-requested; err != nil {
		t.Fatalf("request after freeze: %v", err)
	}
	thawed := c.Session()
	if err := cl.Resume("mon." + frozen.Mon); err != nil {
		t.Fatal(err)
	}
	if thawed.Mon == frozen.Mon || thawed.Sessions <= frozen.Sessions {
		t.Fatalf("after freezing mon.%s: session %+v", frozen.Mon, thawed)
	}
	t.Logf("mon.%s frozen: new session with mon.%s after %v (liveness timeout %v); command answered after %v",
		frozen.Mon, thawed.Mon, thawed.LastFailover.Round(time.Millisecond), cfg.LivenessTimeout, answered.Round(time.Millisecond))
	t0 = time.Now()
	changeOSDMap("osd unset")
	t.Logf("osdmap changed and received in %v", time.Since(t0).Round(time.Millisecond))
	if err := cl.WaitQuorum(ctx); err != nil {
		t.Fatal(err)
	}
}
