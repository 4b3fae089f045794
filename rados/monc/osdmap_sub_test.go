package monc

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/purerbd/purerbd/rados/msgr"
)

// nextOSDMap waits for the next message of sub.
func nextOSDMap(t testing.TB, sub *OSDMapSubscription, d time.Duration) (*msgr.Message, osdMapEpochs) {
	t.Helper()
	select {
	case m, ok := <-sub.C():
		if !ok {
			t.Fatal("subscription channel closed")
		}
		if m.Type != MsgOSDMap {
			t.Fatalf("message type %d, want %d", m.Type, MsgOSDMap)
		}
		ep, err := decodeOSDMapEpochs(m.Front, m.Version)
		if err != nil {
			t.Fatal(err)
		}
		return m, ep
	case <-time.After(d):
		t.Fatalf("no osdmap within %v", d)
	}
	return nil, osdMapEpochs{}
}

// waitOSDMapEpoch reads sub until a message carries epoch want or later.
func waitOSDMapEpoch(t testing.TB, sub *OSDMapSubscription, want uint32, d time.Duration) osdMapEpochs {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		_, ep := nextOSDMap(t, sub, time.Until(deadline))
		if ep.last() >= want {
			return ep
		}
	}
}

// cliOSDMapEpoch asks ceph for the current osdmap epoch.
func cliOSDMapEpoch(t testing.TB, run func(args ...string) ([]byte, error)) uint32 {
	t.Helper()
	out, err := run("osd", "dump", "-f", "json")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Epoch uint32 `json:"epoch"`
	}
	if err := json.Unmarshal(out, &d); err != nil {
		t.Fatal(err)
	}
	return d.Epoch
}

func TestOSDMapSubscription(t *testing.T) {
	cl := sharedCluster(t)
	c := connect(t, adminConfig(t, cl))
	ctx := testContext(t, 60*time.Second)
	ceph := func(args ...string) ([]byte, error) { return cl.Ceph(ctx, args...) }

	sub, err := c.SubscribeOSDMap(0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.SubscribeOSDMap(0); err == nil {
		t.Error("a second subscription was accepted")
	}
	m, first := nextOSDMap(t, sub, 10*time.Second)
	if len(first.full) != 1 || first.fullLast == 0 || first.fsid != c.FSID() {
		t.Fatalf("first message %v carries %+v, want one full map", m, first)
	}
	if got := c.OSDMapEpoch(); got < first.fullLast {
		t.Errorf("OSDMapEpoch %d, below %d", got, first.fullLast)
	}
	newest, oldest, err := c.GetVersion(ctx, "osdmap")
	if err != nil || newest < uint64(first.fullLast) || oldest == 0 || oldest > newest {
		t.Errorf("GetVersion(osdmap) = %d, %d, %v; first map %d", newest, oldest, err, first.fullLast)
	}

	// a change made by ceph arrives as a new epoch (a new pool each run:
	// creating one that exists changes nothing, and -count=2 then waited
	// for an epoch that had come with the first map)
	pool := fmt.Sprintf("monc-sub-%d", time.Now().UnixNano())
	if _, err := cl.Ceph(ctx, "osd", "pool", "create", pool, "8"); err != nil {
		t.Fatal(err)
	}
	want := cliOSDMapEpoch(t, ceph)
	if want <= first.fullLast {
		t.Fatalf("creating pool %s left the osdmap at e%d", pool, want)
	}
	ep := waitOSDMapEpoch(t, sub, want, 10*time.Second)
	if ep.incLast < want {
		t.Errorf("epoch %d arrived as %+v, want an incremental", want, ep)
	}
	t.Logf("first full map e%d, pool create seen as incremental e%d..e%d", first.fullLast, ep.incFirst, ep.incLast)

	// a full map on request
	fm, err := c.RequestOSDMap(ctx, first.fullLast)
	if err != nil {
		t.Fatal(err)
	}
	if fe, _ := decodeOSDMapEpochs(fm.Front, fm.Version); !fe.hasFull(first.fullLast) {
		t.Errorf("RequestOSDMap(%d) carries %+v", first.fullLast, fe)
	}
	latest, err := c.RequestOSDMap(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if le, _ := decodeOSDMapEpochs(latest.Front, latest.Version); le.fullLast < want {
		t.Errorf("RequestOSDMap(0) carries %+v, want e%d or later", le, want)
	}
	if _, err := c.RequestOSDMap(ctx, want+1000); err == nil {
		t.Error("RequestOSDMap of a future epoch succeeded")
	} else {
		t.Logf("future epoch: %v", err)
	}

	sub.Close()
	for range sub.C() { // drains, then ends
	}
	// subscribing again from an older epoch replays the incrementals
	sub2, err := c.SubscribeOSDMap(first.fullLast)
	if err != nil {
		t.Fatal(err)
	}
	defer sub2.Close()
	_, again := nextOSDMap(t, sub2, 10*time.Second)
	if again.incFirst != first.fullLast && again.fullFirst != first.fullLast {
		t.Errorf("resubscribing from e%d gave %+v", first.fullLast, again)
	}
}
