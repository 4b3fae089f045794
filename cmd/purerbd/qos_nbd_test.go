package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/purerbd/purerbd/rados/radostest"
)

// TestQoSThroughNBD measures librbd's QoS limits set by Ceph's own `rbd
// config image set` on `purerbd nbd serve --image` with fio's nbd
// engine (4K random writes, 16 in flight, the first 2 s left out: the
// bucket holds one second's worth at the start): the rate fio sees is
// the limit's, within 5% above and 20% below (the bound below allows
// for a busy machine); then the limit raised with the server running
// and the volume open, and measured again.
func TestQoSThroughNBD(t *testing.T) {
	radostest.SkipShort(t)
	bin := buildBinary(t)
	c := radostest.New(t, radostest.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	for _, args := range [][]string{
		{"create", "--size", "256M", "rbd/qos"},
		{"config", "image", "set", "rbd/qos", "rbd_qos_write_iops_limit", "150"},
	} {
		if out, err := c.Rbd(ctx, args...); err != nil {
			t.Fatalf("rbd %v: %v: %s", args, err, out)
		}
	}
	dir := t.TempDir()
	socket := filepath.Join(dir, "nbd.sock")
	_, stderr := startServeBinary(t, bin, c.Conf, filepath.Join(dir, "run"), "--image", "rbd/qos", "--socket", socket)
	waitSocket(t, socket, 60*time.Second)
	measure := func(limit float64) {
		t.Helper()
		out := runTool(t, "fio", "--name=qos", "--ioengine=nbd", "--uri=nbd+unix:///?socket="+socket, "--rw=randwrite", "--bs=4k",
			"--iodepth=16", "--time_based", "--ramp_time=2", "--runtime=4", "--output-format=json")
		var r struct {
			Jobs []struct {
				Write struct {
					IOPS float64 `json:"iops"`
				} `json:"write"`
			} `json:"jobs"`
		}
		// fio may print notes before its JSON
		if err := json.Unmarshal([]byte(out[max(0, strings.IndexByte(out, '{')):]), &r); err != nil || len(r.Jobs) != 1 {
			t.Fatalf("fio output: %v\n%s", err, out)
		}
		got := r.Jobs[0].Write.IOPS
		t.Logf("write IOPS limit %.0f: fio measured %.1f (%.3fx)", limit, got, got/limit)
		if got > limit*1.05 || got < limit*0.8 {
			t.Errorf("write IOPS limit %.0f: fio measured %.1f\n%s", limit, got, stderr.String())
		}
	}
	measure(150)
	if out, err := c.Rbd(ctx, "config", "image", "set", "rbd/qos", "rbd_qos_write_iops_limit", "400"); err != nil {
		t.Fatalf("rbd config image set: %v: %s", err, out)
	}
	measure(400)
}
