package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// nbdVariant is what the RBD-over-NBD section runs on.
type nbdVariant int

const (
	nbdPlain nbdVariant = iota
	nbdLUKS2
	nbdQoS
)

// qosNeverBinding are librbd QoS options (name, value) that set every
// limit far above what the suite's machine reaches: IOPS and bytes,
// total, read and write.
var qosNeverBinding = []string{
	"rbd_qos_iops_limit", "10000000", "rbd_qos_read_iops_limit", "10000000", "rbd_qos_write_iops_limit", "10000000",
	"rbd_qos_bps_limit", "100000000000", "rbd_qos_read_bps_limit", "100000000000", "rbd_qos_write_bps_limit", "100000000000",
}

// rbdNBD compares two userspace NBD exports of an RBD image: purerbd's
// NBD server on the rbd package (purerbd-bench serve, the code path of
// the node plugin without the kernel) and qemu-nbd over librbd, with the
// same fio nbd clients. Each server has an image of its own (so they do
// not trade the exclusive lock); their CPU and RSS come from /proc.
//
// The variants measure what a feature costs each side, beside the plain
// section of the same run: nbdLUKS2 formats both images with `rbd
// encryption format ... luks2` and each server serves their plaintext
// (purerbd through rbd/luks, qemu-nbd through librbd's crypto layer);
// nbdQoS sets librbd's QoS limits on both images far above what the
// machine reaches, so that each side's limiter runs on every request
// without ever holding one back.
func (s *suite) rbdNBD(ctx context.Context, c *cluster, imageSize int64, v nbdVariant) *Section {
	sec := &Section{
		ID:         "rbd-nbd",
		Title:      fmt.Sprintf("NBD export of an RBD image (%s): purerbd vs qemu-nbd (librbd)", c.store),
		Short:      "RBD over NBD",
		Contenders: []string{"purerbd", "qemu-nbd"},
		CPUOf:      "server process (utime+stime from /proc/PID/stat around each run; peak RSS = VmHWM)",
		Method: fmt.Sprintf("Two %s images with librbd's default features, filled by `rbd bench`. purerbd: "+
			"`purerbd-bench serve --image` (nbd.Server with the rbd.Image as its backend). qemu-nbd: "+
			"`qemu-nbd -f raw -t rbd:rbd/IMAGE:conf=...` with its default cache mode (librbd's cache on, "+
			"writethrough until a flush, as rbd-nbd runs it). Clients: fio `ioengine=nbd`, %s per run.",
			humanSize(imageSize), s.cfg.nbdRuntime()),
	}
	switch v {
	case nbdQoS:
		sec.ID, sec.Short = "rbd-nbd-qos", "QoS RBD over NBD"
		sec.Title = fmt.Sprintf("NBD export of an RBD image with QoS limits that never bind (%s): purerbd vs qemu-nbd (librbd)", c.store)
		sec.Method = fmt.Sprintf("As the plain RBD-over-NBD section, with `rbd config image set IMAGE` %s on both images "+
			"(librbd's QoS options, which purerbd reads from the same image metadata): each request passes the "+
			"limiters, none waits. Clients: fio `ioengine=nbd`, %s per run.", strings.Join(qosNeverBinding, " "), s.cfg.nbdRuntime())
	case nbdLUKS2:
		sec.ID, sec.Short = "rbd-nbd-luks2", "LUKS2 RBD over NBD"
		sec.Title = fmt.Sprintf("NBD export of a LUKS2-encrypted RBD image (%s): purerbd vs qemu-nbd (librbd's encryption)", c.store)
		sec.Method = fmt.Sprintf("As the plain RBD-over-NBD section, purerbd's image then formatted by "+
			"`rbd encryption format IMAGE luks2` (AES-256-XTS, 4096-byte sectors, data from 16 MiB, the keyslot's "+
			"Argon2id cost from cryptsetup's benchmark) and copied by `rbd cp` for qemu-nbd, so that both unlock "+
			"the same keyslot at the same cost (peak RSS includes the unlock). purerbd: "+
			"`purerbd-bench serve --image --luks-passphrase-file` (rbd/luks over the rbd.Image). qemu-nbd: "+
			"`--image-opts driver=rbd,...,encrypt.format=luks2` (librbd's crypto layer). Clients: fio `ioengine=nbd`, "+
			"%s per run over the plaintext (the image less 16 MiB).", s.cfg.nbdRuntime())
	}
	c.watchOSD(sec)
	s.label(c, sec)
	if t := haveTools("fio"); t != "" {
		sec.Skipped = t + " is not installed (make deps)"
		return sec
	}
	if why := c.qemuRBD(); why != "" {
		sec.Skipped = why
		return sec
	}
	// the sockets, logs and passphrase are where the release's qemu-nbd
	// sees them too
	dir, err := s.peerDir(c, sec.ID)
	if err != nil {
		sec.Skipped = err.Error()
		return sec
	}
	sock := func(who string) string { return filepath.Join(dir, who+".sock") }
	image := func(who string) string { return "bench-nbd-" + sec.ID + "-" + who }
	servers := map[string]*daemon{}
	defer func() {
		for _, d := range servers {
			d.stop()
		}
		for _, who := range sec.Contenders {
			_, _ = s.tool(context.Background(), c, "rbd", "rm", "--no-progress", "rbd/"+image(who))
		}
	}()
	pass := filepath.Join(dir, "passphrase")
	if err := os.WriteFile(pass, []byte("bench passphrase"), 0o600); err != nil {
		sec.Skipped = err.Error()
		return sec
	}
	plainSize := imageSize
	for i, who := range sec.Contenders {
		// An encrypted image after the first is a copy of the first,
		// header and all: rbd encryption format sizes the keyslot's
		// Argon2 memory by a benchmark of the moment, and a second format
		// running beside the first server's unlock would give the second
		// server a cheaper key derivation (less memory, less time).
		copied := v == nbdLUKS2 && i > 0
		if copied {
			if _, err := s.tool(ctx, c, "rbd", "cp", "--no-progress", "rbd/"+image(sec.Contenders[0]), "rbd/"+image(who)); err != nil {
				sec.Skipped = "copying the encrypted image: " + err.Error()
				return sec
			}
		} else if err := s.makeImage(ctx, c, image(who), imageSize, ""); err != nil {
			sec.Skipped = "creating the image: " + err.Error()
			return sec
		}
		argv := []string{"qemu-nbd", "-k", sock(who), "-f", "raw", "-t",
			fmt.Sprintf("rbd:rbd/%s:conf=%s:id=admin", image(who), c.Conf)}
		if who == "purerbd" {
			argv = []string{s.bin("purerbd-bench"), "serve", "-c", c.Conf, "-p", "rbd", "--image", image(who),
				"--socket", sock(who)}
		}
		for i := 0; v == nbdQoS && i < len(qosNeverBinding); i += 2 {
			if _, err := s.tool(ctx, c, "rbd", "config", "image", "set", "rbd/"+image(who), qosNeverBinding[i], qosNeverBinding[i+1]); err != nil {
				sec.Skipped = "rbd config image set: " + err.Error()
				return sec
			}
		}
		if v == nbdLUKS2 {
			if !copied {
				if _, err := s.tool(ctx, c, "rbd", "encryption", "format", "rbd/"+image(who), "luks2", pass); err != nil {
					sec.Skipped = "rbd encryption format: " + err.Error()
					return sec
				}
			}
			plainSize = imageSize - 16<<20
			if who == "purerbd" {
				argv = append(argv, "--luks-passphrase-file", pass)
			} else {
				argv = []string{"qemu-nbd", "-k", sock(who), "-t", "--object", "secret,id=sec0,file=" + pass, "--image-opts",
					fmt.Sprintf("driver=rbd,pool=rbd,image=%s,conf=%s,user=admin,encrypt.format=luks2,encrypt.key-secret=sec0", image(who), c.Conf)}
			}
		}
		launch := c.command
		if who == "purerbd" {
			launch = hostCommand
		}
		d, err := startServerCmd(ctx, filepath.Join(dir, who+".log"), sock(who), launch(ctx, argv[0], argv[1:]...))
		if err == nil {
			servers[who] = d
		} else {
			sec.Skipped = fmt.Sprintf("%s did not start: %v", who, err)
			return sec
		}
	}
	for _, k := range pick(s.cfg,
		[]struct {
			rw, bs string
			qd     int
		}{{"randread", "4k", 32}, {"randwrite", "4k", 1}, {"randwrite", "4k", 32}, {"write", "1M", 8}},
		[]struct {
			rw, bs string
			qd     int
		}{{"randread", "4k", 32}, {"randwrite", "4k", 32}}) {
		unit, series := "IOPS", "4k "+k.rw
		if k.bs != "4k" {
			unit, series = "MiB/s", ""
		}
		c := newCase(fmt.Sprintf("%s %s QD%d", k.bs, k.rw, k.qd), unit, series, float64(k.qd),
			"rw", k.rw, "bs", k.bs, "qd", strconv.Itoa(k.qd))
		if k.qd == 32 {
			c.Params["latplot"] = "1"
		}
		sec.Cases = append(sec.Cases, c)
	}
	run := func(ctx context.Context, who string, cs *Case) (Sample, error) {
		d := servers[who]
		before, err := d.usage()
		if err != nil {
			return Sample{}, err
		}
		qd, _ := strconv.Atoi(cs.Params["qd"])
		smp, _, err := runFio(ctx, hostCommand, dir, nil, fioJob{
			Name: who, Engine: []string{"--ioengine=nbd", "--uri=nbd+unix:///?socket=" + sock(who)},
			RW: cs.Params["rw"], BS: cs.Params["bs"], QD: qd, Size: strconv.FormatInt(plainSize, 10),
			Runtime: s.cfg.nbdRuntime(),
		}, cs.Unit == "IOPS")
		if err != nil {
			return Sample{}, err
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
