package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/purerbd/purerbd/rados"
	"github.com/purerbd/purerbd/rbd"
)

// `purerbd rbd bench`: rbd bench's I/O benchmark, with its output lines.

func (c *rbdCommand) bench(ctx context.Context, args []string) error {
	fs := newFlagSet("bench", c.stderr)
	ioType := fs.String("io-type", "", "write, read or readwrite")
	ioSize := fs.String("io-size", "4K", "I/O size")
	threads := fs.Int("io-threads", 16, "concurrent I/Os")
	total := fs.String("io-total", "1G", "total bytes")
	pattern := fs.String("io-pattern", "seq", "seq or rand")
	cache := cacheFlag(fs)
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 || (*ioType != "write" && *ioType != "read" && *ioType != "readwrite" && *ioType != "rw") {
		return errors.New("usage: bench --io-type write|read|readwrite [options] IMAGE")
	}
	bs, err := rbdSize(*ioSize, 1)
	if err != nil || bs == 0 {
		return fmt.Errorf("--io-size: bad size %q", *ioSize)
	}
	tot, err := rbdSize(*total, 1)
	if err != nil {
		return err
	}
	sp, err := c.parseSpec(pos[0], false)
	if err != nil {
		return err
	}
	opts := rbd.OpenOptions{ReadOnly: *ioType == "read"}
	if !opts.ReadOnly {
		opts.WriteAround = cliWriteAround(*cache)
	}
	return c.withImage(ctx, sp, opts, func(img *rbd.Image) error {
		size := img.Size()
		if size < bs {
			return fmt.Errorf("image smaller than one I/O")
		}
		nOps := tot / bs
		var next, done, bytesDone atomic.Int64
		var wg sync.WaitGroup
		var firstErr atomic.Value
		// as rbd bench: every write sends one random buffer (made only
		// when the run writes), made before the clock starts and frozen
		// (librbd checksums rbd bench's buffer once and never copies it;
		// rados.Frozen does the same here); reads get a buffer per
		// thread, also made (and touched, so that the kernel backs them)
		// before it: on a VM where the first touch of a page costs 12-20
		// µs, 16 fresh 4 MiB buffers cost 0.25 s inside the clock (by
		// hand, 4M reads: 338-401 ops/s without, 398-417 with)
		seed := uint64(time.Now().UnixNano())
		var frozen *rados.Frozen // nil when nothing is written
		if *ioType != "read" {
			wbuf := make([]byte, bs)
			fillRandom(wbuf, rand.New(rand.NewPCG(seed, 1)))
			frozen = rados.Freeze(wbuf)
		}
		nThreads := max(*threads, 1)
		rbufs := make([][]byte, nThreads) // nil when nothing is read
		if *ioType != "write" {
			for t := range rbufs {
				rbufs[t] = make([]byte, bs)
				touchPages(rbufs[t])
			}
		}
		startT := time.Now()
		for t := 0; t < nThreads; t++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rbuf := rbufs[t]
				for {
					i := next.Add(1) - 1
					if i >= nOps || ctx.Err() != nil {
						return
					}
					// I/O i draws from a hash of the run's seed and i:
					// each run picks fresh blocks, as rbd bench does (it
					// seeds rand() with the time), and the pick costs no
					// lock between the threads
					h := benchHash(seed + uint64(i))
					var off int64
					if *pattern == "rand" {
						off = int64(h%uint64(size/bs)) * bs
					} else {
						off = (i * bs) % (size / bs * bs)
					}
					write := *ioType == "write" || (*ioType != "read" && h>>63 == 0)
					var err error
					if write {
						_, err = img.WriteFrozenAt(ctx, frozen, off)
					} else {
						_, err = img.ReadAtContext(ctx, rbuf, off)
					}
					if err != nil {
						firstErr.CompareAndSwap(nil, err)
						return
					}
					done.Add(1)
					bytesDone.Add(bs)
				}
			}()
		}
		wg.Wait()
		if err, _ := firstErr.Load().(error); err != nil {
			return err
		}
		// as rbd bench: the run ends when the writes are durable
		if err := img.Flush(ctx); err != nil {
			return err
		}
		elapsed := time.Since(startT)
		secs := elapsed.Seconds()
		fmt.Fprintf(c.stdout, "bench  type %s io_size %d io_threads %d bytes %d pattern %s\n",
			*ioType, bs, *threads, bytesDone.Load(), *pattern)
		fmt.Fprintf(c.stdout, "elapsed: %.2f  ops: %d  ops/sec: %.2f  bytes/sec: %s/s\n",
			secs, done.Load(), float64(done.Load())/secs, humanBytes(uint64(float64(bytesDone.Load())/secs)))
		return nil
	})
}

// benchHash is SplitMix64's output function: I/O i of a bench run draws
// its offset (and, reading and writing, its direction) from
// benchHash(seed+i).
func benchHash(i uint64) uint64 {
	z := i*0x9e3779b97f4a7c15 + 0x9e3779b97f4a7c15
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// fillRandom fills p from rng, eight bytes at a time.
func fillRandom(p []byte, rng *rand.Rand) {
	for len(p) >= 8 {
		binary.LittleEndian.PutUint64(p, rng.Uint64())
		p = p[8:]
	}
	for i := range p {
		p[i] = byte(rng.Uint32())
	}
}

// touchPages writes to every page of p, so that the kernel backs it now.
func touchPages(p []byte) {
	for i := 0; i < len(p); i += 4096 {
		p[i] = 0
	}
}
