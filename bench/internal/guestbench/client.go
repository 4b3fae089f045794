package guestbench

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/purerbd/purerbd/rados"
	"github.com/purerbd/purerbd/rados/cephconf"
	"github.com/purerbd/purerbd/rbd"
)

// The rbd-client group measures the RBD clients with no block device
// in between: purerbd's rbd package in this process, and librbd through
// fio's rbd engine, each beside krbd's device. A block device served
// from userspace cannot be faster than the client behind it, so these
// runs say how much of a device path's distance to krbd is the client's
// own, and how far Ceph's own userspace client is from krbd in the same
// guest.

// selfLoaded is a contender with no block device: it fills its image
// and runs each case itself.
type selfLoaded interface {
	fill(ctx context.Context, span int64) error
	runCase(ctx context.Context, c ioCase, span int64, d time.Duration) (ioResult, error)
}

// purerbdClient is an image opened by this process with the rbd
// package, as `purerbd nbd map` opens a writable one (the exclusive
// lock taken at open).
type purerbdClient struct {
	name string
	conn *rados.Conn
	img  *rbd.Image
}

func openPurerbdClient(ctx context.Context, o options, image string) (*purerbdClient, error) {
	conn, err := rados.ConnectFromConf(ctx, cephconf.Args{MonHost: o.mon, ID: o.user, Keyring: o.keyring, NoConfig: true})
	if err != nil {
		return nil, err
	}
	ioc, err := conn.IOContext(ctx, o.pool, "")
	if err != nil {
		conn.Close()
		return nil, err
	}
	img, err := rbd.Open(ctx, ioc, image, rbd.OpenOptions{AcquireLock: true})
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("open %s/%s: %w", o.pool, image, err)
	}
	return &purerbdClient{name: o.pool + "/" + image, conn: conn, img: img}, nil
}

func (p *purerbdClient) Path() string { return p.name + " (the rbd package in the guest program)" }

// PID is this process: its CPU and switches are the client's (and the
// load's, which the device contenders' figures leave out).
func (p *purerbdClient) PID() int { return os.Getpid() }

func (p *purerbdClient) Close(context.Context) error {
	return errors.Join(p.img.Close(), p.conn.Close())
}

func (p *purerbdClient) fill(ctx context.Context, span int64) error {
	buf := make([]byte, 1<<20)
	_, _ = rand.Read(buf)
	for off := int64(0); off+int64(len(buf)) <= span; off += int64(len(buf)) {
		if _, err := p.img.WriteAtContext(ctx, buf, off); err != nil {
			return fmt.Errorf("fill %s at %d: %w", p.name, off, err)
		}
	}
	return nil
}

func (p *purerbdClient) runCase(ctx context.Context, c ioCase, span int64, d time.Duration) (ioResult, error) {
	return runWorkers(ctx, p.name, span, c, d, func() (ioTarget, error) { return imageIO{ctx, p.img}, nil })
}

// imageIO is one worker's view of an image.
type imageIO struct {
	ctx context.Context
	img *rbd.Image
}

func (i imageIO) ReadAt(b []byte, off int64) (int, error) {
	return i.img.ReadAtContext(i.ctx, b, off)
}

func (i imageIO) WriteAt(b []byte, off int64) (int, error) {
	return i.img.WriteAtContext(i.ctx, b, off)
}

func (i imageIO) Close() error { return nil }

// librbdFio is an image reached through librbd by fio's rbd engine, one
// fio process per run. librbd's cache is off, as the other contenders
// have none.
type librbdFio struct {
	fio   string
	conf  string
	user  string
	pool  string
	image string
}

// librbdConfPath is the ceph.conf written for librbd; given to fio
// through CEPH_CONF, so that nothing else in the guest reads it.
const librbdConfPath = "/etc/ceph/librbd.conf"

func newLibrbdFio(o options, image string) (*librbdFio, error) {
	if _, err := os.Stat(o.fio); err != nil {
		return nil, fmt.Errorf("fio: %w", err)
	}
	conf := fmt.Sprintf("[global]\nmon_host = %s\nkeyring = %s\nlog_file = /dev/null\nadmin_socket =\n"+
		"[client]\nrbd_cache = false\n", o.mon, o.keyring)
	if err := os.WriteFile(librbdConfPath, []byte(conf), 0o600); err != nil {
		return nil, err
	}
	return &librbdFio{fio: o.fio, conf: librbdConfPath, user: o.user, pool: o.pool, image: image}, nil
}

func (l *librbdFio) Path() string { return l.pool + "/" + l.image + " (librbd, fio's rbd engine)" }

// PID is 0: each run is a fio process of its own, which connects to
// the cluster within the run's window (its CPU is not measured).
func (l *librbdFio) PID() int                    { return 0 }
func (l *librbdFio) Close(context.Context) error { return nil }

func (l *librbdFio) fill(ctx context.Context, span int64) error {
	_, err := l.run(ctx, "--rw=write", "--bs=1M", "--iodepth=4", fmt.Sprintf("--size=%d", span))
	return err
}

func (l *librbdFio) runCase(ctx context.Context, c ioCase, span int64, d time.Duration) (ioResult, error) {
	job, err := l.run(ctx, fioCaseArgs(c, span, d)...)
	if err != nil {
		return ioResult{}, err
	}
	return fioResult(job, c, l.image)
}

// fioCaseArgs are the fio options of case c over span bytes for d.
func fioCaseArgs(c ioCase, span int64, d time.Duration) []string {
	rw := "read"
	switch {
	case c.Write && c.Rand:
		rw = "randwrite"
	case c.Write:
		rw = "write"
	case c.Rand:
		rw = "randread"
	}
	secs := max(int(d.Round(time.Second)/time.Second), 1)
	return []string{"--rw=" + rw, fmt.Sprintf("--bs=%d", c.BS), fmt.Sprintf("--iodepth=%d", c.QD),
		fmt.Sprintf("--size=%d", span), "--time_based=1", fmt.Sprintf("--runtime=%d", secs),
		"--norandommap=1", "--randrepeat=0"}
}

// fioResult is the run's figures from fio's job on target.
func fioResult(job fioJob, c ioCase, target string) (ioResult, error) {
	dir := job.Read
	if c.Write {
		dir = job.Write
	}
	if dir.TotalIOs == 0 || dir.RuntimeMs <= 0 {
		return ioResult{}, fmt.Errorf("fio %s on %s: no I/O completed", c.Name, target)
	}
	seconds := float64(dir.RuntimeMs) / 1000
	return ioResult{
		ops: dir.TotalIOs, bytes: dir.IOBytes, seconds: seconds,
		summary: &latSummary{mean: dir.Clat.Mean, pct: map[float64]float64{
			50: dir.Clat.Percentile["50.000000"], 99: dir.Clat.Percentile["99.000000"], 99.9: dir.Clat.Percentile["99.900000"]}},
		ownProcess: true,
	}, nil
}

// fioJob is the part of one job of fio's JSON output read here. Its
// usr_cpu, sys_cpu and ctx are left: fio takes them with
// getrusage(RUSAGE_THREAD), from the job's own thread, not librbd's.
type fioJob struct {
	Read  fioDir `json:"read"`
	Write fioDir `json:"write"`
}

type fioDir struct {
	IOBytes   int64 `json:"io_bytes"`
	TotalIOs  int64 `json:"total_ios"`
	RuntimeMs int64 `json:"runtime"`
	Clat      struct {
		Mean       float64            `json:"mean"`
		Percentile map[string]float64 `json:"percentile"`
	} `json:"clat_ns"`
}

// run runs one fio job on the image with args and returns its figures.
func (l *librbdFio) run(ctx context.Context, args ...string) (fioJob, error) {
	return runFio(ctx, l.fio, []string{"CEPH_CONF=" + l.conf}, append([]string{"--name=librbd", "--ioengine=rbd",
		"--clientname=" + l.user, "--pool=" + l.pool, "--rbdname=" + l.image}, args...)...)
}

// fioOnDevice runs case c on the block device dev through fio's libaio
// engine (-fio-load): the guest program's own load is a Go process,
// whose runtime threads wake beside the one issuing the I/O.
func fioOnDevice(ctx context.Context, fio, dev string, c ioCase, span int64, d time.Duration) (ioResult, error) {
	job, err := runFio(ctx, fio, nil, append([]string{"--name=device", "--ioengine=libaio", "--filename=" + dev,
		"--allow_file_create=0"},
		fioCaseArgs(c, span, d)...)...)
	if err != nil {
		return ioResult{}, err
	}
	return fioResult(job, c, dev)
}

// runFio runs one fio job with args, env added to its environment, and
// returns its figures.
func runFio(ctx context.Context, fio string, env []string, args ...string) (fioJob, error) {
	all := append([]string{"--direct=1", "--output-format=json", "--percentile_list=50:99:99.9"}, args...)
	cmd := exec.CommandContext(ctx, fio, all...)
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		// the end of what fio said: its reason is last
		msg := strings.TrimSpace(stderr.String())
		if len(msg) > 400 {
			msg = "…" + msg[len(msg)-400:]
		}
		return fioJob{}, fmt.Errorf("fio %v: %w: %s", args, err, msg)
	}
	// fio may print notes before its JSON
	out := stdout.Bytes()
	if i := bytes.IndexByte(out, '{'); i > 0 {
		out = out[i:]
	}
	var res struct {
		Jobs []fioJob `json:"jobs"`
	}
	if err := json.Unmarshal(out, &res); err != nil {
		return fioJob{}, fmt.Errorf("fio %v: output: %w", args, err)
	}
	if len(res.Jobs) != 1 {
		return fioJob{}, fmt.Errorf("fio %v: %d jobs in its output", args, len(res.Jobs))
	}
	return res.Jobs[0], nil
}
