package main

import (
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// result is one device's throughput, measured the same way for ublk and
// nbd.ko: sequential 1 MiB O_DIRECT writes and reads over a range, and
// 4 KiB random O_DIRECT reads and writes from four threads for a second
// each.
type result struct {
	WriteMiBs     float64 `json:"write_mib_s"`
	ReadMiBs      float64 `json:"read_mib_s"`
	RandReadIOPS  float64 `json:"randread_4k_iops"`
	RandWriteIOPS float64 `json:"randwrite_4k_iops"`
}

func measure(dev string, span int64) (result, error) {
	var r result
	f, err := os.OpenFile(dev, os.O_RDWR|unix.O_DIRECT, 0)
	if err != nil {
		return r, err
	}
	defer f.Close()
	buf, err := unix.Mmap(-1, 0, mib, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		return r, err
	}
	defer unix.Munmap(buf)
	for i := range buf {
		buf[i] = byte(i)
	}
	t := time.Now()
	for off := int64(0); off < span; off += mib {
		if _, err := f.WriteAt(buf, off); err != nil {
			return r, err
		}
	}
	r.WriteMiBs = float64(span) / mib / time.Since(t).Seconds()
	t = time.Now()
	for off := int64(0); off < span; off += mib {
		if _, err := f.ReadAt(buf, off); err != nil {
			return r, err
		}
	}
	r.ReadMiBs = float64(span) / mib / time.Since(t).Seconds()
	if r.RandReadIOPS, err = random(dev, span, false); err != nil {
		return r, err
	}
	if r.RandWriteIOPS, err = random(dev, span, true); err != nil {
		return r, err
	}
	fmt.Printf("    %s: write %.1f MiB/s, read %.1f MiB/s, 4k randread %.0f IOPS, 4k randwrite %.0f IOPS\n",
		dev, r.WriteMiBs, r.ReadMiBs, r.RandReadIOPS, r.RandWriteIOPS)
	return r, nil
}

func random(dev string, span int64, write bool) (float64, error) {
	const threads = 4
	var (
		ops   atomic.Int64
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	deadline := time.Now().Add(time.Second)
	start := time.Now()
	for i := range threads {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := func() error {
				f, err := os.OpenFile(dev, os.O_RDWR|unix.O_DIRECT, 0)
				if err != nil {
					return err
				}
				defer f.Close()
				buf, err := unix.Mmap(-1, 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
				if err != nil {
					return err
				}
				defer unix.Munmap(buf)
				rng := rand.New(rand.NewPCG(uint64(i), 7))
				for time.Now().Before(deadline) {
					off := rng.Int64N(span/4096) * 4096
					if write {
						_, err = f.WriteAt(buf, off)
					} else {
						_, err = f.ReadAt(buf, off)
					}
					if err != nil {
						return err
					}
					ops.Add(1)
				}
				return nil
			}()
			if err != nil {
				mu.Lock()
				first = err
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return float64(ops.Load()) / time.Since(start).Seconds(), first
}
