package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/purerbd/purerbd/internal/cli"
	"github.com/purerbd/purerbd/internal/hugebuf"
	"github.com/purerbd/purerbd/rados"
	"github.com/purerbd/purerbd/rbd"
)

// `purerbd rbd bench`: rbd bench's I/O benchmark, with its output lines.

// rbdBenchOptions are bench's options, named as rbd bench's.
type rbdBenchOptions struct {
	ioType, ioSize, total, pattern string
	threads                        int
	cache                          bool
}

func (c *rbdCommand) benchCommand() *cli.Command {
	o := &rbdBenchOptions{ioSize: "4K", threads: 16, total: "1G", pattern: "seq", cache: true}
	cmd := &cli.Command{
		Name: "bench", Summary: "rbd bench's I/O benchmark on an image", Args: "IMAGE", MinArgs: 1, MaxArgs: 1,
		Run: func(ctx context.Context, inv *cli.Invocation) error { return c.bench(ctx, inv.Args[0], o) },
	}
	cmd.Choice(&o.ioType, "--io-type TYPE", []string{"write", "read", "readwrite", "rw"}, "write, read or readwrite (rw)").Required()
	cmd.String(&o.ioSize, "--io-size SIZE", "I/O size")
	cmd.Int(&o.threads, "--io-threads N", "concurrent I/Os")
	cmd.String(&o.total, "--io-total SIZE", "total bytes")
	cmd.Choice(&o.pattern, "--io-pattern PATTERN", []string{"seq", "rand"}, "seq or rand")
	cacheOption(cmd, &o.cache)
	return cmd
}

func (c *rbdCommand) bench(ctx context.Context, spec string, o *rbdBenchOptions) error {
	bs, err := cli.ParseSize(o.ioSize, 1)
	if err != nil || bs == 0 {
		return fmt.Errorf("--io-size: bad size %q", o.ioSize)
	}
	tot, err := cli.ParseSize(o.total, 1)
	if err != nil {
		return err
	}
	sp, err := c.parseSpec(spec, false)
	if err != nil {
		return err
	}
	opts := rbd.OpenOptions{ReadOnly: o.ioType == "read"}
	if !opts.ReadOnly {
		opts.WriteAround = cliWriteAround(o.cache)
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
		// before it, so that first touches of pages stay out of the
		// measured time. The read buffers are hugebuf's: a reply lands in
		// the buffer of the read it answers, which with every thread's
		// read in flight was last written a whole rotation of buffers ago,
		// and the kernel's copy into it pays a TLB miss per 4 KiB page
		// (rbd bench's replies land in memory librbd's messenger takes
		// when each arrives, the memory the previous reply just freed)
		seed := uint64(time.Now().UnixNano())
		var frozen *rados.Frozen // nil when nothing is written
		if o.ioType != "read" {
			wbuf := make([]byte, bs)
			fillRandom(wbuf, rand.New(rand.NewPCG(seed, 1)))
			frozen = rados.Freeze(wbuf)
		}
		nThreads := max(o.threads, 1)
		rbufs := make([][]byte, nThreads) // nil when nothing is read
		if o.ioType != "write" {
			for t := range rbufs {
				b := hugebuf.Alloc(int(bs))
				defer b.Free() // after the threads, which wg.Wait awaits
				rbufs[t] = b.Bytes()
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
					if o.pattern == "rand" {
						off = int64(h%uint64(size/bs)) * bs
					} else {
						off = (i * bs) % (size / bs * bs)
					}
					write := o.ioType == "write" || (o.ioType != "read" && h>>63 == 0)
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
			o.ioType, bs, o.threads, bytesDone.Load(), o.pattern)
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
