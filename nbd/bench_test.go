package nbd_test

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/purerbd/purerbd/nbd/nbdtest"
)

// The benchmarks drive a memory export through a Unix socket with the
// nbdtest client, many requests in flight on one connection.

const benchSize = 1 << 30

func benchClient(b *testing.B) *nbdtest.Client {
	b.Helper()
	srv, m := nbdtest.StartMemory(b, "bench", benchSize)
	// Fill the first 256 MiB so reads hit allocated chunks.
	buf := make([]byte, 1<<20)
	for off := int64(0); off < 256<<20; off += 1 << 20 {
		m.WriteAt(context.Background(), buf, off)
	}
	c, err := nbdtest.Dial(context.Background(), "unix", srv.Socket, nbdtest.Options{Export: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	return c
}

func benchRandom(b *testing.B, write bool) {
	c := benchClient(b)
	const bs = 4096
	b.SetBytes(bs)
	b.SetParallelism(16) // 16 x GOMAXPROCS requests in flight
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		p := make([]byte, bs)
		for pb.Next() {
			off := int64(rand.IntN((256<<20)/bs)) * bs
			var err error
			if write {
				err = c.WriteAt(ctx, p, off, 0)
			} else {
				err = c.ReadAt(ctx, p, off)
			}
			if err != nil {
				b.Error(err)
				return
			}
		}
	})
}

func benchSequential(b *testing.B, write bool) {
	c := benchClient(b)
	const bs = 1 << 20
	b.SetBytes(bs)
	b.SetParallelism(2)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		p := make([]byte, bs)
		off := int64(rand.IntN(256)) * bs
		for pb.Next() {
			off = (off + bs) % (256 << 20)
			var err error
			if write {
				err = c.WriteAt(ctx, p, off, 0)
			} else {
				err = c.ReadAt(ctx, p, off)
			}
			if err != nil {
				b.Error(err)
				return
			}
		}
	})
}

func BenchmarkMemoryRandRead4K(b *testing.B)  { benchRandom(b, false) }
func BenchmarkMemoryRandWrite4K(b *testing.B) { benchRandom(b, true) }
func BenchmarkMemorySeqRead1M(b *testing.B)   { benchSequential(b, false) }
func BenchmarkMemorySeqWrite1M(b *testing.B)  { benchSequential(b, true) }
