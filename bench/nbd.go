package bench

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
)

// nbdMemory compares purerbd's NBD server with nbdkit, both serving a
// sparse in-memory disk on a Unix socket, with the same clients: fio's
// nbd engine (libnbd) and nbdcopy. The servers are the contenders: their
// CPU and peak RSS are read from /proc around every run.
func (s *suite) nbdMemory(ctx context.Context) *Section {
	size := pick(s.cfg, int64(512<<20), int64(64<<20))
	sec := &Section{
		ID:         "nbd-memory",
		Title:      "NBD server: memory export, purerbd vs nbdkit",
		Short:      "NBD memory",
		Contenders: []string{"purerbd", "nbdkit"},
		CPUOf:      "server process (utime+stime from /proc/PID/stat around each run; peak RSS = VmHWM)",
		Method: fmt.Sprintf("`purerbd nbd serve --memory %[1]s` and `nbdkit memory %[1]s`, each on its own Unix socket, "+
			"both running for the whole section. Clients: fio `ioengine=nbd` (libnbd, one connection, "+
			"time-based, %[2]s per run over the whole export) and nbdcopy (random data file in "+
			"with `--flush`, the whole export out to `null:`). The first case of each repetition (nbdcopy in) "+
			"fills the export, so reads hit allocated memory.",
			humanSize(size), s.cfg.nbdRuntime()),
	}
	if t := haveTools("fio", "nbdkit", "nbdcopy"); t != "" {
		sec.Skipped = t + " is not installed (make deps)"
		return sec
	}
	dir := filepath.Join(s.work, "nbd")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		sec.Skipped = err.Error()
		return sec
	}
	input := filepath.Join(dir, "input.bin")
	if err := randomFile(input, size); err != nil {
		sec.Skipped = err.Error()
		return sec
	}
	sz := strconv.FormatInt(size, 10)
	servers := map[string]*daemon{}
	defer func() {
		for who, d := range servers {
			u := d.stop()
			s.log.Debug("nbd server stopped", "server", who, "cpu_s", u.CPU)
		}
	}()
	sock := func(who string) string { return filepath.Join(dir, who+".sock") }
	for who, argv := range map[string][]string{
		"purerbd": {s.bin("purerbd"), "nbd", "serve", "--socket", sock("purerbd"), "--memory", sz},
		"nbdkit":  {"nbdkit", "-f", "-U", sock("nbdkit"), "memory", sz},
	} {
		d, err := startServer(ctx, filepath.Join(dir, who+".log"), sock(who), argv[0], argv[1:]...)
		if err == nil {
			servers[who] = d
		} else {
			sec.Skipped = fmt.Sprintf("%s did not start: %v", who, err)
			return sec
		}
	}
	uri := func(who string) string { return "nbd+unix:///?socket=" + sock(who) }

	sec.Cases = append(sec.Cases, newCase("nbdcopy in", "MiB/s", "", 0, "copy", "in"))
	for _, rw := range []string{"randread", "randwrite"} {
		for _, qd := range pick(s.cfg, []int{1, 8, 32}, []int{1, 32}) {
			c := newCase(fmt.Sprintf("4k %s QD%d", rw, qd), "IOPS", "4k "+rw, float64(qd),
				"rw", rw, "bs", "4k", "qd", strconv.Itoa(qd))
			if qd == 32 {
				c.Params["latplot"] = "1"
			}
			sec.Cases = append(sec.Cases, c)
		}
	}
	sec.Cases = append(sec.Cases,
		newCase("1M read QD8", "MiB/s", "", 0, "rw", "read", "bs", "1M", "qd", "8"),
		newCase("1M write QD8", "MiB/s", "", 0, "rw", "write", "bs", "1M", "qd", "8"),
		newCase("nbdcopy out", "MiB/s", "", 0, "copy", "out"))

	run := func(ctx context.Context, who string, c *Case) (Sample, error) {
		d := servers[who]
		before, err := d.usage()
		if err != nil {
			return Sample{}, err
		}
		var smp Sample
		switch c.Params["copy"] {
		case "in", "out":
			args := []string{"--flush", input, uri(who)}
			if c.Params["copy"] == "out" {
				args = []string{uri(who), "null:"}
			}
			cr, err := runChild(ctx, dir, nil, "nbdcopy", args...)
			if err != nil {
				return Sample{}, err
			}
			secs := cr.Wall.Seconds()
			smp = Sample{Value: float64(size) / (1 << 20) / secs, Bytes: size, Seconds: secs}
		default:
			qd, _ := strconv.Atoi(c.Params["qd"])
			smp, _, err = runFio(ctx, hostCommand, dir, nil, fioJob{
				Name: who, Engine: []string{"--ioengine=nbd", "--uri=" + uri(who)},
				RW: c.Params["rw"], BS: c.Params["bs"], QD: qd, Size: sz,
				Runtime: s.cfg.nbdRuntime(),
			}, c.Unit == "IOPS")
			if err != nil {
				return Sample{}, err
			}
		}
		after, err := d.usage()
		if err != nil {
			return Sample{}, err
		}
		smp.CPU, smp.RSS = after.CPU-before.CPU, after.RSS
		return smp, nil
	}
	sec.interleave(ctx, s.log, s.cfg.Reps, run)
	return sec
}

// randomFile writes size random bytes to path.
func randomFile(path string, size int64) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	buf := make([]byte, 1<<20)
	for n := int64(0); n < size; n += int64(len(buf)) {
		_, _ = rand.Read(buf)
		if _, err := f.Write(buf[:min(int64(len(buf)), size-n)]); err != nil {
			f.Close()
			return fmt.Errorf("write %s: %w", path, err)
		}
	}
	return f.Close()
}

// humanSize prints a byte count with a binary unit: 512M, 4K, 1G.
func humanSize(n int64) string {
	for _, u := range []struct {
		s string
		b int64
	}{{"T", 1 << 40}, {"G", 1 << 30}, {"M", 1 << 20}, {"K", 1 << 10}} {
		if n >= u.b && n%u.b == 0 {
			return strconv.FormatInt(n/u.b, 10) + u.s
		}
	}
	return strconv.FormatInt(n, 10)
}
