package monc

import (
	"runtime"
	"testing"

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
