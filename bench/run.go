package bench

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Report is everything one run of the suite measured.
type Report struct {
	Machine    Machine
	Quick      bool
	Reps       int
	Runtime    time.Duration // per time-based run
	NBDRuntime time.Duration // per NBD fio job
	Elapsed    time.Duration
	Kinds      []string // the cluster kinds the run asked for ("pacific tuned"), in order
	Clusters   []ClusterInfo
	Sections   []*Section
	Profiles   []Profile
	CSI        *ControlPlane
	// KernelVMs are the kernel-path sections, one per guest kernel (a
	// run measures one; a merged report keeps each kernel's latest).
	KernelVMs []*KernelVM
	Footprint *Footprint
	Missing   []string // parts of the suite that could not run, and why
	// Parts are the runs a merged report was made from (MergeReports);
	// empty for a single run.
	Parts []RunPart
}

// kernelVMMissing starts the Missing line of a run without the kernel VM.
const kernelVMMissing = "The kernel path in a VM (/dev/nbdN served by purerbd, nbdkit and krbd) and the node " +
	"plugin's RSS with volumes attached: "

// ClusterInfo describes a cluster the RADOS and RBD sections ran on.
type ClusterInfo struct {
	Store   string // OSD object store
	Kind    string // release and tuning: "reef untuned"
	Version string // `ceph version` of the running daemons
	Tools   []Tool // the release's peer tools (rbd, fio, qemu-nbd) and their versions
	Boot    time.Duration
	Err     string // why it could not be started
}

// suite is the state of one run.
type suite struct {
	cfg  Config
	log  *slog.Logger
	work string
	bins map[string]Binary
}

func (s *suite) bin(name string) string { return s.bins[name].Path }

// Run runs the selected sections and writes report.md and the plots into
// cfg.ReportDir. It fails only when nothing could be measured at all; a
// section that cannot run is reported as skipped, with the reason.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	cfg = cfg.withDefaults()
	if err := cfg.checkKinds(); err != nil {
		return nil, err
	}
	s := &suite{cfg: cfg, log: cfg.Logger, work: cfg.WorkDir}
	if s.work == "" {
		dir, err := os.MkdirTemp("", "purerbd-bench-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir)
		s.work = dir
	}
	if err := os.MkdirAll(s.work, 0o755); err != nil {
		return nil, err
	}
	// children run in the work directory: every path handed to them is
	// absolute
	var err error
	if s.work, err = filepath.Abs(s.work); err != nil {
		return nil, err
	}
	if cfg.Root, err = filepath.Abs(cfg.Root); err != nil {
		return nil, err
	}
	s.cfg.Root = cfg.Root
	t0 := time.Now()
	rep := &Report{Machine: probeMachine(ctx), Quick: cfg.Quick, Reps: cfg.Reps, Runtime: cfg.Runtime,
		NBDRuntime: cfg.nbdRuntime()}
	for _, k := range cfg.clusterKinds() {
		rep.Kinds = append(rep.Kinds, k.label())
	}
	s.log.Info("bench: building binaries", "work", s.work)
	bins, err := buildBinaries(ctx, s.cfg.Root, filepath.Join(s.work, "bin"))
	if err != nil {
		return nil, err
	}
	s.bins = bins
	for _, id := range cfg.Only {
		if !slices.Contains(Sections(), id) {
			return nil, fmt.Errorf("bench: unknown section %q (have %s)", id, strings.Join(Sections(), ", "))
		}
	}

	if cfg.wants(SectionNBD) {
		s.log.Info("bench: NBD memory export vs nbdkit")
		rep.Sections = append(rep.Sections, s.nbdMemory(ctx))
	}
	s.clusterSections(ctx, rep)
	if cfg.wants(SectionKernelVM) {
		s.log.Info("bench: kernel path and node plugin in a VM")
		rep.KernelVMs = []*KernelVM{s.kernelVM(ctx)}
	}
	if cfg.wants(SectionFootprint) {
		rep.Footprint = s.footprint(ctx)
	}
	for _, sec := range rep.Sections {
		if sec.Skipped != "" {
			rep.Missing = append(rep.Missing, fmt.Sprintf("%s: skipped: %s", sec.Title, sec.Skipped))
		}
	}
	// what this suite never measures, and why
	if k := rep.kernelVM(); k == nil || k.Skipped != "" {
		why := "not selected"
		if k != nil {
			why = k.Skipped
		}
		rep.Missing = append(rep.Missing, kernelVMMissing+why)
	}
	rep.Missing = append(rep.Missing,
		"The kernel path on real hardware: nbd.ko and rbd.ko run only inside a TCG VM here "+
			"(nbd/kernel/vmtest), whose emulation dominates the figures of that section.",
		"A peer for the CSI control plane: ceph-csi (go-ceph over librbd) cannot be installed offline.",
		"Multi-OSD clusters and a network between client and OSDs: one OSD on loopback, sharing 2 cores "+
			"with the clients.")
	rep.Machine.LoadEnd = loadavg()
	rep.Elapsed = time.Since(t0)
	if err := ctx.Err(); err != nil {
		return rep, err
	}
	if err := rep.write(cfg.ReportDir); err != nil {
		return rep, err
	}
	return rep, nil
}

// clusterSections runs the sections that need Ceph on every cluster
// kind of the run (release × tuning, clusterKinds), one after the other:
// on a memstore cluster the RADOS, RBD, CLI and RBD-over-NBD comparisons,
// and on the first kind only the CSI control plane and the profiles
// (purerbd alone, nothing to compare per release); on a bluestore
// cluster the RBD comparison again (full mode).
func (s *suite) clusterSections(ctx context.Context, rep *Report) {
	for i, k := range s.cfg.clusterKinds() {
		if ctx.Err() != nil {
			return
		}
		s.kindSections(ctx, rep, k, i == 0)
	}
}

// kindSections runs the cluster sections on clusters of kind k; first
// adds the sections that run once.
func (s *suite) kindSections(ctx context.Context, rep *Report, k clusterKind, first bool) {
	imageSize := pick(s.cfg, int64(1<<30), int64(128<<20))
	memstore := []string{SectionRados, SectionRBD, SectionRBDCLI, SectionRBDNBD}
	if first {
		memstore = append(memstore, SectionCSI, SectionProfile)
	}
	wants := func(id string) bool { return slices.Contains(memstore, id) && s.cfg.wants(id) }
	if slices.ContainsFunc(memstore, s.cfg.wants) {
		c, err := s.startCluster(ctx, "memstore", k)
		info := ClusterInfo{Store: "memstore", Kind: k.label()}
		if err != nil {
			info.Err = err.Error()
			rep.Missing = append(rep.Missing, "every RADOS and RBD section on "+k.label()+": no memstore cluster: "+err.Error())
		} else {
			info.Version, info.Boot, info.Tools = s.clusterVersion(ctx, c), c.boot, c.peerVersions(ctx)
		}
		rep.Clusters = append(rep.Clusters, info)
		if err == nil {
			if wants(SectionRBD) {
				s.log.Info("bench: RBD, default features", "cluster", k.label())
				rep.Sections = append(rep.Sections, s.rbdLoad(ctx, c, rbdVariant{
					id: "memstore", full: true, short: "RBD memstore",
					title: "RBD image I/O (memstore, default features): purerbd vs librbd (fio rbd engine)",
				}, imageSize))
				if !s.cfg.Quick {
					s.log.Info("bench: RBD, librbd's cache on", "cluster", k.label())
					rep.Sections = append(rep.Sections, s.rbdLoad(ctx, c, rbdVariant{
						id: "cache", cache: true, short: "RBD vs librbd cache",
						title: "RBD image I/O (memstore, default features): purerbd vs librbd with its default cache",
					}, imageSize))
					s.log.Info("bench: RBD, layering only", "cluster", k.label())
					rep.Sections = append(rep.Sections, s.rbdLoad(ctx, c, rbdVariant{
						id: "layering", features: "layering", short: "RBD no lock/objmap",
						title: "RBD image I/O (memstore, layering only: no exclusive-lock, no object-map): purerbd vs librbd",
					}, imageSize))
					s.logOSDSpace(ctx, c, SectionRBD)
				} else if first {
					rep.Missing = append(rep.Missing, "RBD against librbd's default cache, and without "+
						"exclusive-lock/object-map: full mode only")
				}
			}
			if wants(SectionRBDCLI) {
				s.log.Info("bench: rbd bench CLIs", "cluster", k.label())
				rep.Sections = append(rep.Sections, s.rbdCLI(ctx, c, imageSize))
				s.logOSDSpace(ctx, c, SectionRBDCLI)
			}
			if wants(SectionRBDNBD) {
				s.log.Info("bench: RBD over NBD vs qemu-nbd", "cluster", k.label())
				rep.Sections = append(rep.Sections, s.rbdNBD(ctx, c, imageSize, nbdPlain))
				s.log.Info("bench: LUKS2 RBD over NBD vs qemu-nbd with librbd's encryption", "cluster", k.label())
				rep.Sections = append(rep.Sections, s.rbdNBD(ctx, c, imageSize, nbdLUKS2))
				s.log.Info("bench: RBD over NBD with QoS limits that never bind", "cluster", k.label())
				rep.Sections = append(rep.Sections, s.rbdNBD(ctx, c, imageSize, nbdQoS))
				s.logOSDSpace(ctx, c, SectionRBDNBD)
			}
			if wants(SectionCSI) {
				s.log.Info("bench: CSI control plane")
				rep.CSI = s.controlPlane(ctx, c)
				s.logOSDSpace(ctx, c, SectionCSI)
			}
			if wants(SectionProfile) {
				s.log.Info("bench: profiles")
				rep.Profiles = s.profiles(ctx, c, imageSize)
			}
			// Last: removing tens of thousands of small objects has been
			// seen to drive the memstore OSD's used-bytes counter below
			// zero (findings row 16), after which it reports itself full
			// and refuses every write; nothing runs after this section.
			if wants(SectionRados) {
				s.log.Info("bench: RADOS objects", "cluster", k.label())
				rep.Sections = append(rep.Sections, s.radosBench(ctx, c))
				s.logOSDSpace(ctx, c, SectionRados)
			}
			s.closeCluster(c)
		}
	} else if first && s.cfg.wants(SectionProfile) {
		rep.Profiles = s.profiles(ctx, nil, imageSize)
	}
	if !s.cfg.wants(SectionBluestore) {
		return
	}
	if s.cfg.Quick {
		if first {
			rep.Missing = append(rep.Missing, "RBD on bluestore: full mode only")
		}
		return
	}
	c, err := s.startCluster(ctx, "bluestore", k)
	info := ClusterInfo{Store: "bluestore", Kind: k.label()}
	if err != nil {
		info.Err = err.Error()
		rep.Missing = append(rep.Missing, "RBD on bluestore on "+k.label()+": no cluster: "+err.Error())
		rep.Clusters = append(rep.Clusters, info)
		return
	}
	info.Version, info.Boot, info.Tools = s.clusterVersion(ctx, c), c.boot, c.peerVersions(ctx)
	rep.Clusters = append(rep.Clusters, info)
	s.log.Info("bench: RBD on bluestore", "cluster", k.label())
	rep.Sections = append(rep.Sections, s.rbdLoad(ctx, c, rbdVariant{
		id: "bluestore", short: "RBD bluestore",
		title: "RBD image I/O (bluestore, default features): purerbd vs librbd (fio rbd engine)",
	}, imageSize))
	s.closeCluster(c)
}
