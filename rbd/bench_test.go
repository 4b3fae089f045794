package rbd

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// Benchmarks of the image I/O path against the test cluster (compare
// with `rbd bench` on the same cluster).

func benchImage(b *testing.B, size int64) *Image {
	b.Helper()
	ctx := context.Background()
	name := "bench-" + b.Name()
	io := testPoolB(b)
	_ = Remove(ctx, io, name, RemoveOptions{Force: true})
	if err := Create(ctx, io, name, size, CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	img, err := Open(ctx, io, name, OpenOptions{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = img.Close()
		_ = Remove(context.Background(), io, name, RemoveOptions{})
	})
	return img
}

// fillImage writes the whole image, so that reads find data.
func fillImage(b *testing.B, img *Image) {
	b.Helper()
	buf := make([]byte, 4<<20)
	for off := int64(0); off < img.Size(); off += int64(len(buf)) {
		if _, err := img.WriteAtContext(context.Background(), buf, off); err != nil {
			b.Fatal(err)
		}
	}
}

func runParallel(b *testing.B, img *Image, bs int64, threads int, write, random bool) {
	ctx := context.Background()
	size := img.Size()
	var next atomic.Int64
	var wg sync.WaitGroup
	b.SetBytes(bs)
	b.ResetTimer()
	cpu0 := processCPU(b)
	w0 := conn.Stats().OSD.Written
	for t := 0; t < threads; t++ {
		wg.Add(1)
		go func(seed uint64) {
			defer wg.Done()
			r := rand.New(rand.NewPCG(seed, 1))
			buf := make([]byte, bs)
			for {
				i := next.Add(1) - 1
				if i >= int64(b.N) {
					return
				}
				off := (i * bs) % (size / bs * bs)
				if random {
					off = r.Int64N(size/bs) * bs
				}
				var err error
				if write {
					_, err = img.WriteAtContext(ctx, buf, off)
				} else {
					_, err = img.ReadAtContext(ctx, buf, off)
				}
				if err != nil {
					b.Error(err)
					return
				}
			}
		}(uint64(t))
	}
	wg.Wait()
	b.StopTimer()
	// the client's own CPU per operation (the OSD runs in another
	// process): steadier than rates on a busy machine
	b.ReportMetric(float64((processCPU(b)-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
	// how well the sends to the OSDs batch: messages per writev
	if w := conn.Stats().OSD.Written; w.Writes > w0.Writes {
		b.ReportMetric(float64(w.Messages-w0.Messages)/float64(w.Writes-w0.Writes), "msgs/write")
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

func BenchmarkWrite4KRandQD16(b *testing.B) {
	img := benchImage(b, 64<<20)
	runParallel(b, img, 4096, 16, true, true)
}

func BenchmarkWrite4MSeqQD16(b *testing.B) {
	img := benchImage(b, 256<<20)
	runParallel(b, img, 4<<20, 16, true, false)
}

func BenchmarkRead4MSeqQD16(b *testing.B) {
	img := benchImage(b, 256<<20)
	fillImage(b, img)
	runParallel(b, img, 4<<20, 16, false, false)
}

func BenchmarkRead4KRandQD32(b *testing.B) {
	img := benchImage(b, 64<<20)
	fillImage(b, img)
	runParallel(b, img, 4096, 32, false, true)
}

func BenchmarkWrite4KRandQD32(b *testing.B) {
	img := benchImage(b, 64<<20)
	runParallel(b, img, 4096, 32, true, true)
}
