package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Profile is one pprof capture of a purerbd-side workload, summarised by
// `go tool pprof -top`.
type Profile struct {
	Name       string // what ran
	Throughput string // what it achieved while profiled
	CPUTop     string // hottest functions by flat CPU
	CumTop     string // by cumulative CPU
	AllocTop   string // by bytes allocated
	Err        string
}

// profiles captures CPU and allocation profiles of the purerbd side of
// the workloads where purerbd trails its peer: the NBD server, and the
// RBD and RADOS client paths at 4 KiB QD32. c may be nil (no cluster):
// only the NBD profile is taken then.
func (s *suite) profiles(ctx context.Context, c *cluster, imageSize int64) []Profile {
	dir := filepath.Join(s.work, "profiles")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return []Profile{{Name: "profiles", Err: err.Error()}}
	}
	var out []Profile
	out = append(out, s.profileNBD(ctx, dir))
	if c == nil {
		return out
	}
	image := "bench-profile"
	if err := s.makeImage(ctx, c, image, imageSize, ""); err != nil {
		return append(out, Profile{Name: "rbd", Err: err.Error()})
	}
	defer func() { _, _ = s.tool(context.Background(), c, "rbd", "rm", "--no-progress", "rbd/"+image) }()
	// the objects the rados workload leaves are thrown away with the cluster
	for _, w := range []struct {
		name   string
		target []string
		rw, bs string
		qd     int
	}{
		{"rbd.Image 4k randwrite QD32 (purerbd-bench load)", []string{"--image", image}, "randwrite", "4K", 32},
		{"rbd.Image 4k randread QD32 (purerbd-bench load)", []string{"--image", image}, "randread", "4K", 32},
		{"rbd.Image 4M seq read QD16 (purerbd-bench load)", []string{"--image", image}, "read", "4M", 16},
		{"rados objects 4K write QD32 (purerbd-bench load --objects)", []string{"--objects", "bench-profile", "--size", "64M"}, "write", "4K", 32},
	} {
		p := Profile{Name: w.name}
		base := filepath.Join(dir, slug(w.name))
		iops := w.bs == "4K"
		smp, err := s.loadgen(ctx, c, w.target, w.rw, w.bs, w.qd, iops,
			[]string{"--cpuprofile", base + ".cpu.pprof", "--memprofile", base + ".allocs.pprof"})
		if err != nil {
			p.Err = err.Error()
		} else {
			unit, per := "IOPS", fmt.Sprintf("%s CPU s/Mop", num(smp.CPUPerMop()))
			if !iops {
				unit, per = "MiB/s", fmt.Sprintf("%s CPU s/GiB", num(smp.CPUPerGiB()))
			}
			p.Throughput = fmt.Sprintf("%.0f %s, p99 %s µs, %s (whole process) while profiled", smp.Value, unit,
				micros(smp.Lat.At(99)), per)
			s.summarise(ctx, &p, base)
		}
		out = append(out, p)
	}
	return out
}

// profileNBD serves a memory disk from purerbd-bench serve (the same
// nbd.Server and nbd.Memory as `purerbd nbd serve --memory`) with
// profiling on, under fio 4k random writes then reads at QD32.
func (s *suite) profileNBD(ctx context.Context, dir string) Profile {
	p := Profile{Name: "NBD server, memory export, fio 4k randwrite then randread QD32 (purerbd-bench serve --memory)"}
	if t := haveTools("fio"); t != "" {
		p.Err = t + " is not installed"
		return p
	}
	base := filepath.Join(dir, "nbd-memory")
	sock := filepath.Join(dir, "nbd.sock")
	size := pick(s.cfg, int64(512<<20), int64(64<<20))
	d, err := startServer(ctx, base+".log", sock, s.bin("purerbd-bench"), "serve", "--memory", strconv.FormatInt(size, 10),
		"--socket", sock, "--cpuprofile", base+".cpu.pprof", "--memprofile", base+".allocs.pprof")
	if err != nil {
		p.Err = err.Error()
		return p
	}
	var res []string
	for _, rw := range []string{"randwrite", "randread"} {
		smp, _, err := runFio(ctx, hostCommand, dir, nil, fioJob{
			Name: "profile-" + rw, Engine: []string{"--ioengine=nbd", "--uri=nbd+unix:///?socket=" + sock},
			RW: rw, BS: "4k", QD: 32, Size: strconv.FormatInt(size, 10), Runtime: s.cfg.Runtime,
		}, true)
		if err != nil {
			d.stop()
			p.Err = err.Error()
			return p
		}
		res = append(res, fmt.Sprintf("%s %.0f IOPS", rw, smp.Value))
	}
	d.stop() // SIGTERM: the profiles are written on the way out
	p.Throughput = strings.Join(res, ", ") + " while profiled"
	s.summarise(ctx, &p, base)
	return p
}

// summarise runs go tool pprof -top on base.cpu.pprof and
// base.allocs.pprof.
func (s *suite) summarise(ctx context.Context, p *Profile, base string) {
	top := func(args ...string) string {
		ctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		out, err := exec.CommandContext(ctx, "go", append([]string{"tool", "pprof", "-top"}, args...)...).CombinedOutput()
		if err != nil {
			return fmt.Sprintf("go tool pprof: %v: %s", err, lastLines(out, 2))
		}
		var keep []string
		for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			if strings.HasPrefix(l, "File:") || strings.HasPrefix(l, "Build ID:") || strings.HasPrefix(l, "Time:") {
				continue
			}
			keep = append(keep, l)
		}
		return strings.Join(keep, "\n")
	}
	p.CPUTop = top("-nodecount=15", base+".cpu.pprof")
	p.CumTop = top("-cum", "-nodecount=25", base+".cpu.pprof")
	p.AllocTop = top("-sample_index=alloc_space", "-nodecount=12", base+".allocs.pprof")
}
