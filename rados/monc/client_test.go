package monc

import (
	"runtime"
	"testing"
	"time"

	"github.com/purerbd/purerbd/rados/denc"
)

func TestConnect(t *testing.T) {
	cl := sharedCluster(t)
	before := runtime.NumGoroutine()
	c := connect(t, adminConfig(t, cl))
	mm := c.MonMap()
	if mm == nil || mm.FSID.String() != cl.FSID {
		t.Fatalf("monmap %v, want fsid %s", mm, cl.FSID)
	}
	if got := c.FSID().String(); got != cl.FSID {
		t.Errorf("FSID %s, want %s", got, cl.FSID)
	}
	si := c.Session()
	if !si.Connected || si.Mon != "a" || si.Sessions != 1 || si.GlobalID == 0 {
		t.Errorf("session %+v", si)
	}
	if si.GlobalID != c.GlobalID() {
		t.Errorf("session global id %d, client %d", si.GlobalID, c.GlobalID())
	}
	have := map[denc.EntityType]bool{}
	for _, ti := range c.Tickets() {
		have[ti.Service] = true
	}
	for _, s := range []denc.EntityType{denc.EntityTypeAuth, denc.EntityTypeMon, denc.EntityTypeOSD, denc.EntityTypeMgr} {
		if !have[s] {
			t.Errorf("no %s ticket (have %v)", s, c.Tickets())
		}
	}
	t.Logf("session %+v mode %s", si, si.Mode)
	c.Close()
	c.Close()
	waitGoroutines(t, before)
}

// TestMonMapUpdates changes the MonMap with ceph and waits for the client
// to hold the new epoch.
func TestMonMapUpdates(t *testing.T) {
	cl := sharedCluster(t)
	c := connect(t, adminConfig(t, cl))
	ctx := testContext(t, 30*time.Second)
	before := c.MonMap()
	set := func(strategy string) {
		t.Helper()
		if _, err := cl.Ceph(ctx, "mon", "set", "election_strategy", strategy); err != nil {
			t.Fatal(err)
		}
	}
	set("connectivity")
	defer set("classic")
	deadline := time.Now().Add(10 * time.Second)
	for {
		mm := c.MonMap()
		if mm.Epoch > before.Epoch {
			if mm.ElectionStrategy != ElectionConnectivity {
				t.Errorf("monmap e%d has strategy %d", mm.Epoch, mm.ElectionStrategy)
			}
			t.Logf("monmap e%d -> e%d", before.Epoch, mm.Epoch)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("still monmap e%d", mm.Epoch)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, _, err := c.CommandJSON(ctx, map[string]any{"prefix": "status"}, nil); err != nil {
		t.Fatal(err)
	}
}

// TestCentralConfig subscribes to the monitors' configuration for the
// client.
func TestCentralConfig(t *testing.T) {
	cl := sharedCluster(t)
	ctx := testContext(t, 30*time.Second)
	if _, err := cl.Ceph(ctx, "config", "set", "client.admin", "rbd_default_order", "23"); err != nil {
		t.Fatal(err)
	}
	cfg := adminConfig(t, cl)
	cfg.SubscribeConfig = true
	c := connect(t, cfg)
	deadline := time.Now().Add(10 * time.Second)
	for c.CentralConfig()["rbd_default_order"] != "23" {
		if time.Now().After(deadline) {
			t.Fatalf("central config %v", c.CentralConfig())
		}
		time.Sleep(20 * time.Millisecond)
	}
	// a change reaches the subscribed client
	if _, err := cl.Ceph(ctx, "config", "set", "client.admin", "rbd_default_order", "24"); err != nil {
		t.Fatal(err)
	}
	for c.CentralConfig()["rbd_default_order"] != "24" {
		if time.Now().After(deadline) {
			t.Fatalf("central config %v after the change", c.CentralConfig())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := cl.Ceph(ctx, "config", "rm", "client.admin", "rbd_default_order"); err != nil {
		t.Fatal(err)
	}
}
