package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/purerbd/purerbd/bench/internal/loadgen"
	"github.com/purerbd/purerbd/rados"
	"github.com/purerbd/purerbd/rados/cephconf"
	"github.com/purerbd/purerbd/rbd"
)

// runLoad is `purerbd-bench load`: the purerbd-side load generator the
// suite runs as a child process (so getrusage sees only it). It prints
// one JSON object (loadgen.Result) on stdout.
func runLoad(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("load", flag.ContinueOnError)
	fs.SetOutput(stderr)
	conf := fs.String("c", "", "ceph.conf (its [client] keyring is used)")
	pool := fs.String("p", "rbd", "pool")
	image := fs.String("image", "", "RBD image to run against")
	objects := fs.String("objects", "", "instead of an image: whole objects named PREFIX_N of --bs bytes")
	rw := fs.String("rw", "randread", "randread, randwrite, read or write")
	bs := fs.String("bs", "4K", "request size (K, M suffixes)")
	qd := fs.Int("qd", 32, "requests in flight")
	writeAround := fs.Bool("write-around", false, "images: turn on the write-around cache (rbd.WriteAround with librbd's 24 MiB)")
	runtime := fs.Duration("runtime", 3*time.Second, "how long to run")
	size := fs.String("size", "", "region exercised (default: the image; objects: 1G)")
	var prof profiles
	fs.StringVar(&prof.cpu, "cpuprofile", "", "write a CPU profile of the run here")
	fs.StringVar(&prof.allocs, "memprofile", "", "write an allocation profile of the run here")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if (*image == "") == (*objects == "") {
		return errors.New("give exactly one of --image and --objects")
	}
	b, err := parseSize(*bs)
	if err != nil {
		return fmt.Errorf("--bs: %w", err)
	}
	opts := loadgen.Options{RW: *rw, BS: int(b), QD: *qd, Runtime: *runtime}
	if *size != "" {
		if opts.Size, err = parseSize(*size); err != nil {
			return fmt.Errorf("--size: %w", err)
		}
	}
	conn, err := rados.ConnectFromConf(ctx, cephconf.Args{Conf: *conf})
	if err != nil {
		return err
	}
	defer conn.Close()
	ioc, err := conn.IOContext(ctx, *pool, "")
	if err != nil {
		return err
	}
	var target loadgen.Target
	if *image != "" {
		var wa rbd.WriteAround
		if *writeAround {
			wa.MaxDirty = rbd.DefaultMaxDirty
		}
		img, err := rbd.Open(ctx, ioc, *image, rbd.OpenOptions{WriteAround: wa})
		if err != nil {
			return err
		}
		defer img.Close()
		if opts.Size == 0 || opts.Size > img.Size() {
			opts.Size = img.Size()
		}
		target = imageTarget{img}
	} else {
		if opts.Size == 0 {
			opts.Size = 1 << 30
		}
		target = objectTarget{ioc: ioc, prefix: *objects, bs: int64(b)}
	}
	if err := prof.start(); err != nil {
		return err
	}
	res, err := loadgen.Run(ctx, target, opts)
	if perr := prof.stop(); err == nil {
		err = perr
	}
	if err != nil {
		return err
	}
	return json.NewEncoder(stdout).Encode(res)
}

// imageTarget runs a workload on an RBD image.
type imageTarget struct{ img *rbd.Image }

func (t imageTarget) ReadAt(ctx context.Context, p []byte, off int64) (int, error) {
	return t.img.ReadAtContext(ctx, p, off)
}

func (t imageTarget) WriteAt(ctx context.Context, p []byte, off int64) (int, error) {
	return t.img.WriteAtContext(ctx, p, off)
}

// objectTarget maps request k (offset k*bs) to whole object PREFIX_k, as
// rados bench writes and reads them.
type objectTarget struct {
	ioc    *rados.IOContext
	prefix string
	bs     int64
}

func (t objectTarget) name(off int64) string { return t.prefix + "_" + strconv.FormatInt(off/t.bs, 10) }

func (t objectTarget) ReadAt(ctx context.Context, p []byte, off int64) (int, error) {
	return t.ioc.Read(ctx, t.name(off), p, 0)
}

func (t objectTarget) WriteAt(ctx context.Context, p []byte, off int64) (int, error) {
	return len(p), t.ioc.WriteFull(ctx, t.name(off), p)
}

// parseSize reads a byte count with an optional K, M, G or T suffix.
func parseSize(s string) (int64, error) {
	mult := int64(1)
	if n := len(s); n > 0 {
		switch s[n-1] {
		case 'K', 'k':
			mult = 1 << 10
		case 'M', 'm':
			mult = 1 << 20
		case 'G', 'g':
			mult = 1 << 30
		case 'T', 't':
			mult = 1 << 40
		}
		if mult != 1 {
			s = s[:n-1]
		}
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v <= 0 || v > (1<<62)/mult {
		return 0, fmt.Errorf("bad size %q", s)
	}
	return v * mult, nil
}
