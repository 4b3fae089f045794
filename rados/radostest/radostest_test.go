package radostest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/purerbd/purerbd/rados/radostest"
)

var cluster *radostest.Cluster

func TestMain(m *testing.M) {
	os.Exit(radostest.Main(m, radostest.Options{}, &cluster))
}

// TestClusterUsable writes an object with the rados tool and reads it
// back, and an RBD image with rbd: the pool is initialised and usable.
func TestClusterUsable(t *testing.T) {
	radostest.SkipShort(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	t.Logf("boot to usable pool: %v", cluster.Started)
	in := filepath.Join(t.TempDir(), "in")
	want := bytes.Repeat([]byte("purerbd"), 1000)
	if err := os.WriteFile(in, want, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := cluster.Rados(ctx, "-p", cluster.Pool, "put", "obj", in); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "out")
	if _, err := cluster.Rados(ctx, "-p", cluster.Pool, "get", "obj", out); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(out)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("object read back differs (err %v, %d bytes)", err, len(got))
	}
	// an image of this run: with -count the previous run's is still there
	img := fmt.Sprintf("%s/img-%d", cluster.Pool, time.Now().UnixNano())
	if _, err := cluster.Rbd(ctx, "create", "--size", "16M", img); err != nil {
		t.Fatal(err)
	}
	info, err := cluster.Rbd(ctx, "info", "--format", "json", img)
	if err != nil {
		t.Fatal(err)
	}
	var ii struct {
		Size uint64 `json:"size"`
	}
	if err := json.Unmarshal(info, &ii); err != nil || ii.Size != 16<<20 {
		t.Fatalf("rbd info: %s (%v)", info, err)
	}
	if _, err := cluster.Rbd(ctx, "rm", "--no-progress", img); err != nil {
		t.Fatal(err)
	}
}

// TestConfAndKeys checks what the harness promises its users.
func TestConfAndKeys(t *testing.T) {
	radostest.SkipShort(t)
	conf, err := os.ReadFile(cluster.Conf)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(conf), "mon host = "+cluster.MonHost()) {
		t.Errorf("ceph.conf lacks mon host %s", cluster.MonHost())
	}
	kr, err := os.ReadFile(cluster.AdminKeyring)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(kr), cluster.AdminKey) || len(cluster.AdminKey) != 40 {
		t.Errorf("admin keyring does not hold the admin key")
	}
	st, err := os.Stat(cluster.AdminKeyring)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("admin keyring mode %v, want 0600", st.Mode().Perm())
	}
	if len(cluster.MonAddrs) != 1 || !strings.HasPrefix(cluster.MonAddrs[0], "127.0.0.1:") {
		t.Errorf("mon addrs %v", cluster.MonAddrs)
	}
}

// TestKillAndRestartOSD exercises the fault helpers on a cluster of the
// test's own, and checks that daemons are stopped by PID on Close.
func TestKillAndRestartOSD(t *testing.T) {
	c := radostest.New(t, radostest.Options{Pool: "-", ObjectStore: radostest.StoreBluestore})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	pid := c.PID("osd.0")
	if pid == 0 {
		t.Fatal("osd.0 not running")
	}
	if err := c.Kill("osd.0"); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, 0); err == nil {
		t.Fatalf("osd.0 pid %d still alive after Kill", pid)
	}
	if err := c.Start("osd.0"); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitOSDsUp(ctx); err != nil {
		t.Fatal(err)
	}
	pids := []int{c.PID("mon.a"), c.PID("osd.0")}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	for _, p := range pids {
		if syscall.Kill(p, 0) == nil {
			t.Errorf("pid %d still alive after Close", p)
		}
	}
	if _, err := os.Stat(c.Dir); !os.IsNotExist(err) {
		t.Errorf("cluster dir %s not removed", c.Dir)
	}
}

// TestShapesAndModes boots a three-mon, three-OSD cluster forced to secure
// mode and a one-by-one cluster forced to crc, and checks Ceph agrees.
func TestShapesAndModes(t *testing.T) {
	for _, tc := range []struct {
		opts       radostest.Options
		mons, osds int
	}{
		{radostest.Options{Mons: 3, OSDs: 3, Mode: radostest.ModeSecure, Pool: "-"}, 3, 3},
		{radostest.Options{Mode: radostest.ModeCRC, Pool: "-", MsgrV1: true}, 1, 1},
	} {
		t.Run(tc.opts.Mode, func(t *testing.T) {
			c := radostest.New(t, tc.opts)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			asok := filepath.Join(c.Dir, "run", "ceph-mon.a.asok")
			out, err := c.Ceph(ctx, "--admin-daemon", asok, "config", "get", "ms_mon_service_mode")
			if err != nil {
				t.Fatal(err)
			}
			var mode map[string]string
			if err := json.Unmarshal(out, &mode); err != nil || mode["ms_mon_service_mode"] != tc.opts.Mode {
				t.Errorf("mon.a ms_mon_service_mode: %s (%v), want %q", out, err, tc.opts.Mode)
			}
			out, err = c.Ceph(ctx, "status", "-f", "json")
			if err != nil {
				t.Fatal(err)
			}
			var st struct {
				QuorumNames []string `json:"quorum_names"`
				OSDMap      struct {
					NumUpOSDs int `json:"num_up_osds"`
				} `json:"osdmap"`
			}
			if err := json.Unmarshal(out, &st); err != nil {
				t.Fatal(err)
			}
			if len(st.QuorumNames) != tc.mons || st.OSDMap.NumUpOSDs != tc.osds {
				t.Errorf("quorum %v, %d OSDs up; want %d mons, %d OSDs", st.QuorumNames, st.OSDMap.NumUpOSDs, tc.mons, tc.osds)
			}
			if tc.opts.MsgrV1 && (len(c.MonV1Addrs) != 1 || !strings.Contains(c.MonHost(), "v1:")) {
				t.Errorf("msgr1 requested but mon host is %s", c.MonHost())
			}
		})
	}
}
