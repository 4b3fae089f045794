package rados

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// The benchmarks run against the package's test cluster (one memstore
// OSD on loopback): what they measure is the client's overhead on the
// path, not storage.

func BenchmarkWrite4KQD1(b *testing.B)  { benchObjects(b, 4<<10, 1, false) }
func BenchmarkRead4KQD1(b *testing.B)   { benchObjects(b, 4<<10, 1, true) }
func BenchmarkWrite4KQD32(b *testing.B) { benchObjects(b, 4<<10, 32, false) }
func BenchmarkRead4KQD32(b *testing.B)  { benchObjects(b, 4<<10, 32, true) }
func BenchmarkWrite4MQD16(b *testing.B) { benchObjects(b, 4<<20, 16, false) }
func BenchmarkRead4MQD16(b *testing.B)  { benchObjects(b, 4<<20, 16, true) }

// benchObjects writes or reads whole objects of size with qd requests in
// flight.
func benchObjects(b *testing.B, size, qd int, read bool) {
	conn := connectTest(b)
	io := testIO(b, conn, "bench")
	ctx := context.Background()
	nobj := qd * 4
	buf := randomBytes(1, size)
	name := func(i int) string { return fmt.Sprintf("bench-%d-%d", size, i%nobj) }
	if read {
		for i := 0; i < nobj; i++ {
			if err := io.WriteFull(ctx, name(i), buf); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.SetBytes(int64(size))
	cpu0 := processCPU(b)
	b.ResetTimer()
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, qd)
	for w := 0; w < qd; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := make([]byte, size)
			for {
				i := int(next.Add(1) - 1)
				if i >= b.N {
					return
				}
				var err error
				if read {
					_, err = io.Read(ctx, name(i), p, 0)
				} else {
					err = io.Write(ctx, name(i), buf, 0)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	// The client's own CPU per operation (the OSD runs in another
	// process): steadier than rates on a busy machine.
	b.ReportMetric(float64((processCPU(b)-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
}

// processCPU returns the CPU time (user and system) this process has
// used so far.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkVsRadosBench runs `rados bench` (librados) and the same
// workload through this package on the same cluster — 4 KiB objects at
// 32 in flight and 4 MiB objects at 16, whole-object writes and random
// whole-object reads — in alternation over several rounds (the machine
// may be busy with other work), and reports the median purerbd/librados
// ratio of operations per second (>1: purerbd is faster).
//
// Each tool's objects are removed before the other writes, so that the
// test cluster's memstore (4 GiB) holds at most one run of 4 MiB writes:
// with both, a fast machine filled it, and the full OSD held every
// later write and removal, the benchmark's with them. Every step has a
// deadline.
func BenchmarkVsRadosBench(b *testing.B) {
	const secs, rounds = 2, 3
	conn := connectTest(b)
	io := testIO(b, conn, "")
	for _, cfg := range []struct {
		name string
		size int
		qd   int
	}{{"4K-QD32", 4 << 10, 32}, {"4M-QD16", 4 << 20, 16}} {
		data := randomBytes(3, cfg.size)
		var wr, rr []float64
		for r := 0; r < rounds; r++ {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			prefix := fmt.Sprintf("vs-%s-%d", cfg.name, r)
			var radosW, radosR, ourW, ourR float64
			theirs := func() {
				radosW = radosBench(ctx, b, secs, "write", cfg.qd, cfg.size)
				radosR = radosBench(ctx, b, secs, "rand", cfg.qd, cfg.size)
				if _, err := cluster.Rados(ctx, "-p", cluster.Pool, "cleanup"); err != nil {
					b.Fatal(err)
				}
			}
			ours := func() {
				var n int
				n, ourW = timedOps(b, secs, cfg.qd, func(i int, _ []byte) error {
					return io.WriteFull(ctx, fmt.Sprintf("%s-%d", prefix, i), data)
				}, 0)
				_, ourR = timedOps(b, secs, cfg.qd, func(_ int, _ []byte) error {
					// whole objects into the message buffer, as rados bench
					// reads into a bufferlist
					_, err := io.ReadAll(ctx, fmt.Sprintf("%s-%d", prefix, rand.IntN(n)))
					return err
				}, 0)
				for i := 0; i < n; i++ {
					if err := io.Remove(ctx, fmt.Sprintf("%s-%d", prefix, i)); err != nil {
						b.Fatal(err)
					}
				}
			}
			if r%2 == 0 {
				theirs()
				ours()
			} else {
				ours()
				theirs()
			}
			cancel()
			b.Logf("%s round %d: write %.0f vs %.0f IOPS, random read %.0f vs %.0f IOPS [purerbd vs librados]",
				cfg.name, r, ourW, radosW, ourR, radosR)
			wr = append(wr, ourW/radosW)
			rr = append(rr, ourR/radosR)
		}
		slices.Sort(wr)
		slices.Sort(rr)
		b.Logf("%s: median ratios purerbd/librados: write %.2f, random read %.2f", cfg.name, wr[rounds/2], rr[rounds/2])
		b.ReportMetric(wr[rounds/2], cfg.name+"-write-ratio")
		b.ReportMetric(rr[rounds/2], cfg.name+"-read-ratio")
	}
}

// radosBench runs `rados bench` and returns its average IOPS.
func radosBench(ctx context.Context, b *testing.B, secs int, mode string, qd, size int) float64 {
	args := []string{"-p", cluster.Pool, "bench", strconv.Itoa(secs), mode, "-t", strconv.Itoa(qd)}
	if mode == "write" {
		args = append(args, "-b", strconv.Itoa(size), "-O", strconv.Itoa(size), "--no-cleanup")
	}
	out, err := cluster.Rados(ctx, args...)
	if err != nil {
		b.Fatal(err)
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "Average IOPS:"); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				b.Fatal(err)
			}
			return f
		}
	}
	b.Fatalf("no Average IOPS in rados bench output:\n%s", out)
	return 0
}

// timedOps runs op with qd in flight for secs seconds and returns how
// many completed and the rate. Each worker has a buffer of bufSize.
func timedOps(b *testing.B, secs, qd int, op func(i int, buf []byte) error, bufSize int) (int, float64) {
	var next, done atomic.Int64
	deadline := time.Now().Add(time.Duration(secs) * time.Second)
	t0 := time.Now()
	var wg sync.WaitGroup
	for w := 0; w < qd; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, bufSize)
			for time.Now().Before(deadline) {
				if err := op(int(next.Add(1)-1), buf); err != nil {
					b.Error(err)
					return
				}
				done.Add(1)
			}
		}()
	}
	wg.Wait()
	n := int(done.Load())
	return n, float64(n) / time.Since(t0).Seconds()
}
