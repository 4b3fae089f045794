package bench

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Summaries as Ceph 16.2's tools print them.
const radosBenchOut = `hints = 1
Maintaining 32 concurrent writes of 4096 bytes to objects of size 4096 for up to 3 seconds or 0 objects
Object prefix: benchmark_data_host_123
  sec Cur ops   started  finished  avg MB/s  cur MB/s last lat(s)  avg lat(s)
    0       0         0         0         0         0           -           0
    1      32      6930      6898   26.9428   26.9453  0.00411581  0.00460539
Total time run:         3.00541
Total writes made:      20000
Write size:             4096
Object size:            4096
Bandwidth (MB/sec):     25.9949
Stddev Bandwidth:       0.912845
Max bandwidth (MB/sec): 26.9453
Min bandwidth (MB/sec): 25.1836
Average IOPS:           6654
Stddev IOPS:            233.688
Max IOPS:               6898
Min IOPS:               6447
Average Latency(s):     0.00480481
Stddev Latency(s):      0.00164373
Max latency(s):         0.0301925
Min latency(s):         0.00111838
`

const rbdBenchOut = `bench  type write io_size 4096 io_threads 32 bytes 33554432 pattern random
  SEC       OPS   OPS/SEC   BYTES/SEC
    1      6656   6672.44    26 MiB/s
elapsed: 1   ops: 8192   ops/sec: 6547.05   bytes/sec: 26 MiB/s
`

func TestParseRadosBench(t *testing.T) {
	s, err := parseRadosBench([]byte(radosBenchOut), true)
	if err != nil {
		t.Fatal(err)
	}
	if s.Ops != 20000 || s.Bytes != 20000*4096 || math.Abs(s.Value-20000/3.00541) > 0.01 {
		t.Errorf("%+v", s)
	}
	if math.Abs(s.MeanLat-4804810) > 1 {
		t.Errorf("mean latency %v ns", s.MeanLat)
	}
	read := strings.Replace(strings.Replace(radosBenchOut, "Total writes made", "Total reads made", 1), "Write size", "Read size", 1)
	if s, err := parseRadosBench([]byte(read), false); err != nil || math.Abs(s.Value-20000*4096/3.00541/(1<<20)) > 0.01 {
		t.Errorf("read summary: %+v, %v", s, err)
	}
	if _, err := parseRadosBench([]byte("error opening pool"), true); err == nil {
		t.Error("garbage accepted")
	}
}

func TestParseRbdBench(t *testing.T) {
	s, err := parseRbdBench([]byte(rbdBenchOut), 4096, true)
	if err != nil {
		t.Fatal(err)
	}
	if s.Ops != 8192 || s.Value != 6547.05 || math.Abs(s.Seconds-8192/6547.05) > 1e-9 {
		t.Errorf("%+v", s)
	}
	if s, _ := parseRbdBench([]byte(rbdBenchOut), 4<<20, false); math.Abs(s.Value-6547.05*4) > 1e-6 {
		t.Errorf("MiB/s %v", s.Value)
	}
	if _, err := parseRbdBench([]byte("rbd: error opening image"), 4096, true); err == nil {
		t.Error("garbage accepted")
	}
}

func TestNoCacheConf(t *testing.T) {
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "ceph.conf"), filepath.Join(dir, "nocache.conf")
	if err := os.WriteFile(src, []byte("[global]\n\tfsid = x\n[client]\n\tkeyring = /k\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := noCacheConf(src, dst); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(dst)
	if want := "[client]\n\trbd cache = false\n\tkeyring = /k\n"; !strings.Contains(string(b), want) {
		t.Errorf("got %q", b)
	}
}
