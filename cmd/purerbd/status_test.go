package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/purerbd/purerbd/rados/radostest"
)

// testStatus checks `purerbd status` against ceph status, mon dump and
// osd pool ls detail.
func testStatus(t *testing.T, ctx context.Context, run cliRun, cl *radostest.Cluster) {
	out, errOut, code := run(nil, "status", "-c", cl.Conf, "--format", "json")
	if code != 0 {
		t.Fatalf("status: exit %d, %s", code, errOut)
	}
	var st clusterStatus
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("status --format json: %v\n%s", err, out)
	}
	var cs struct {
		FSID   string `json:"fsid"`
		Health struct {
			Status string `json:"status"`
		} `json:"health"`
		QuorumNames []string      `json:"quorum_names"`
		OSDMap      osdMapSummary `json:"osdmap"`
	}
	cephJSON(t, ctx, cl, &cs, "status")
	var md struct {
		Epoch uint32 `json:"epoch"`
		Mons  []struct {
			Rank  int    `json:"rank"`
			Name  string `json:"name"`
			Addrs struct {
				AddrVec []struct {
					Type, Addr string
					Nonce      uint32
				} `json:"addrvec"`
			} `json:"public_addrs"`
		} `json:"mons"`
	}
	cephJSON(t, ctx, cl, &md, "mon", "dump")
	var pools []struct {
		ID   int64  `json:"pool_id"`
		Name string `json:"pool_name"`
		Size int    `json:"size"`
		PG   int    `json:"pg_num"`
	}
	cephJSON(t, ctx, cl, &pools, "osd", "pool", "ls", "detail")

	if st.FSID != cs.FSID || st.FSID != cl.FSID || st.Health != cs.Health.Status ||
		strings.Join(st.Quorum, ",") != strings.Join(cs.QuorumNames, ",") || st.QuorumLeader != "a" {
		t.Errorf("status %+v, ceph %+v", st, cs)
	}
	if st.OSDMap.NumOSDs != cs.OSDMap.NumOSDs || st.OSDMap.NumUpOSDs != cs.OSDMap.NumUpOSDs ||
		st.OSDMap.NumInOSDs != cs.OSDMap.NumInOSDs || st.OSDMap.Epoch > cs.OSDMap.Epoch || st.OSDMap.Epoch == 0 {
		t.Errorf("osdmap %+v, ceph %+v", st.OSDMap, cs.OSDMap)
	}
	if st.MonMap.Epoch != md.Epoch || len(st.MonMap.Mons) != len(md.Mons) {
		t.Fatalf("monmap %+v, ceph %+v", st.MonMap, md)
	}
	for i, m := range md.Mons {
		got := st.MonMap.Mons[i]
		if got.Rank != m.Rank || got.Name != m.Name || !strings.Contains(got.Addrs, m.Addrs.AddrVec[0].Addr) {
			t.Errorf("mon %d: %+v, ceph %+v", i, got, m)
		}
	}
	if len(st.Pools) != len(pools) {
		t.Fatalf("pools %+v, ceph %+v", st.Pools, pools)
	}
	for i, p := range pools {
		got := st.Pools[i]
		if got.ID != p.ID || got.Name != p.Name || got.Size != p.Size || got.PGNum != p.PG || got.Type != "replicated" {
			t.Errorf("pool %d: %+v, ceph %+v", i, got, p)
		}
	}

	text, errOut, code := run(nil, "status", "-c", cl.Conf)
	if code != 0 {
		t.Fatalf("status: exit %d, %s", code, errOut)
	}
	for _, want := range []string{cl.FSID, "HEALTH_", "quorum:", "mon.a", "osds: 1 up, 1 in", "rbd", "application rbd"} {
		if !strings.Contains(text, want) {
			t.Errorf("plain status lacks %q:\n%s", want, text)
		}
	}
	t.Logf("purerbd status:\n%s", text)
}

// cephJSON runs ceph with -f json and decodes its output.
func cephJSON(t *testing.T, ctx context.Context, cl *radostest.Cluster, v any, args ...string) {
	t.Helper()
	out, err := cl.Ceph(ctx, append(args, "-f", "json")...)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(out, v); err != nil {
		t.Fatalf("ceph %v: %v", args, err)
	}
}
