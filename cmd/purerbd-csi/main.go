// Command purerbd-csi is purerbd's CSI plugin: the controller service,
// the node service, or both, for RBD volumes, in one static binary.
//
//	purerbd-csi --controller --endpoint unix:///csi/csi.sock \
//	    --cluster-config /etc/ceph-csi-config/config.json
//
// It maps its flags onto csi.Config and runs a csi.Driver until SIGINT or
// SIGTERM.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/purerbd/purerbd/csi"
	"github.com/purerbd/purerbd/csi/kubeapi"
	"github.com/purerbd/purerbd/internal/buildinfo"
	"github.com/purerbd/purerbd/internal/predecessor"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// options are the flags that are not csi.Config fields.
type options struct {
	version      bool
	domainLabels string
	// readAffinity and crushLabels: ceph-csi's --enable-read-affinity
	// and --crush-location-labels
	readAffinity bool
	crushLabels  string
	secretsDir   string
	logLevel     slog.Level
	logFormat    string
	node         nodeOptions
	kubelet      kubeletOptions
	ceph         cephOptions
}

// cephOptions are the flags that shape the Ceph connections.
type cephOptions struct {
	conf      string // ceph.conf to read the connection modes from
	confGiven bool   // --ceph-conf was given: the file must exist
	msMode    string // overrides the modes of conf
}

// nodeOptions are the flags of the node role (csi.NodeConfig fields).
type nodeOptions struct {
	stateDir   string
	hostRoot   string
	toolsDir   string
	maxVolumes int64
	conns      int
	deviceType string
	ioTimeout  time.Duration
	ioMin      time.Duration
	resend     time.Duration
	reattach   time.Duration
}

// parseFlags maps the command line onto a csi.Config.
func parseFlags(args []string, stderr io.Writer) (csi.Config, options, error) {
	var cfg csi.Config
	var o options
	fs := flag.NewFlagSet("purerbd-csi", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&cfg.Endpoint, "endpoint", "unix:///csi/csi.sock", "unix socket to serve CSI on")
	fs.StringVar(&cfg.NodeID, "nodeid", "", "this node's ID (the Kubernetes node name); required with --node")
	fs.StringVar(&cfg.DriverName, "drivername", csi.DefaultDriverName, "CSI driver name (rbd.csi.ceph.com to take over ceph-csi's volumes, see deploy/MIGRATING.md)")
	fs.StringVar(&cfg.CephCSIInstanceID, "instanceid", csi.DefaultCephCSIInstanceID,
		"ceph-csi's --instanceid of the deployment whose volumes purerbd took over: names ceph-csi's journal, cleaned up when such a volume is deleted")
	fs.StringVar(&cfg.ClusterConfigPath, "cluster-config", "/etc/ceph-csi-config/config.json",
		"cluster configuration file, in ceph-csi's config.json shape")
	fs.StringVar(&cfg.KMSConfigPath, "kms-config", csi.DefaultKMSConfigPath,
		"KMS configuration of encrypted classes that name an encryptionKMSID (ceph-csi's ceph-csi-encryption-kms-config ConfigMap; read when such a class is used)")
	fs.BoolVar(&cfg.Controller, "controller", false, "serve the controller service")
	fs.BoolVar(&cfg.Node, "node", false, "serve the node service")
	fs.StringVar(&o.secretsDir, "secrets-dir", "",
		"directory of the plugin's own Ceph credentials (files userID and userKey, or <clusterID>.userID and <clusterID>.userKey), used by calls that carry no secrets")
	fs.DurationVar(&cfg.SweepInterval, "sweep-interval", 10*time.Minute,
		"how often the controller collects images and snapshots left behind by interrupted deletions (0: never)")
	fs.DurationVar(&cfg.ClusterCheckInterval, "cluster-check-interval", csi.DefaultClusterCheckInterval,
		"how often the controller checks that its clusters answer; a change is logged and shown by the health endpoint, and never makes the plugin unready")
	fs.StringVar(&o.node.stateDir, "state-dir", csi.DefaultStateDir,
		"node: directory of the node state (on a tmpfs: it must be forgotten on reboot, with the NBD devices)")
	fs.StringVar(&o.node.hostRoot, "host-root", "",
		"node: the host's root file system mounted in the container (e.g. /host); mkfs, resize2fs and xfs_growfs run chroot'ed into it")
	fs.StringVar(&o.node.toolsDir, "tools-dir", "", "node: directory holding mkfs.ext4, mkfs.xfs, resize2fs and xfs_growfs (instead of --host-root)")
	fs.StringVar(&o.domainLabels, "domainlabels", "",
		"node: comma-separated node labels (e.g. topology.kubernetes.io/zone) whose values make this node's topology, as ceph-csi's flag: for topologyConstrainedPools; needs get on nodes")
	fs.BoolVar(&o.readAffinity, "enable-read-affinity", false,
		"node: read images from the OSD nearest to this node in CRUSH rather than the primary (librbd's read_from_replica=localize), its location from --crush-location-labels; config.json's readAffinity overrides it per cluster; needs get on nodes")
	fs.StringVar(&o.crushLabels, "crush-location-labels", "",
		"node: comma-separated node labels whose values make this node's CRUSH location, as ceph-csi's flag (topology.kubernetes.io/zone -> zone=VALUE, kubernetes.io/hostname -> host=VALUE)")
	fs.Int64Var(&o.node.maxVolumes, "max-volumes", 0, "node: most volumes staged at once (0: no limit)")
	fs.StringVar(&o.node.deviceType, "device-type", csi.DefaultDeviceType,
		"node: the kernel device volumes are served through unless their class names one (deviceType): auto (ublk where the kernel can resize and recover a ublk device, Linux 6.16 and later; NBD elsewhere), nbd or ublk")
	fs.IntVar(&o.node.conns, "nbd-connections", csi.DefaultNodeConns, "node: NBD connections (kernel queues) per device; a ublk device's queues")
	fs.DurationVar(&o.node.ioTimeout, "nbd-io-timeout", csi.DefaultIOTimeout,
		"node: the kernel's NBD request timeout; 0 (the default): none, requests wait for the plugin however long Ceph takes, and those in flight when it died are resent at the kernel's first look after its successor reattached (--nbd-resend-interval; needs --nbd-connections 1); with a timeout, such requests are resent only after it, so it bounds the stall of a restart")
	fs.DurationVar(&o.node.ioMin, "nbd-io-timeout-min", csi.DefaultMinIOTimeout,
		"node: with --nbd-io-timeout, the floor of the request timeout, where it starts: it goes up to --nbd-io-timeout only while requests outlive it (default: equal to --nbd-io-timeout, fixed)")
	fs.DurationVar(&o.node.resend, "nbd-resend-interval", csi.DefaultResendInterval,
		"node: without a request timeout, the age from which the kernel looks at a request in flight; it looks mostly at whole seconds, and resends the requests a dead plugin held at its first look after its successor reattached (a live plugin's requests older than this at a whole second are logged as \"Possible stuck request\" when it looks, and left alone)")
	fs.DurationVar(&o.node.reattach, "nbd-reattach-timeout", csi.DefaultReattachTimeout,
		"node: how long the kernel holds I/O for a restarted plugin before failing it (dead connection timeout)")
	o.kubelet.addFlags(fs)
	fs.StringVar(&o.ceph.conf, "ceph-conf", defaultCephConf,
		"ceph.conf whose ms_mon_client_mode and ms_client_mode set the connection modes to monitors and OSDs (ceph-csi's ceph-config ConfigMap); the default path is skipped when absent")
	fs.StringVar(&o.ceph.msMode, "ms-mode", "",
		"connection mode to monitors and OSDs alike, over ceph.conf: crc, secure, prefer-crc or prefer-secure (secure: encrypted; default: Ceph's, secure first to monitors, crc first to OSDs)")
	level := fs.String("log-level", "info", "log level: debug, info, warn or error")
	fs.StringVar(&o.logFormat, "log-format", "text", "log format: text or json")
	fs.BoolVar(&o.version, "version", false, "print the version and exit")
	if err := fs.Parse(args); err != nil {
		return cfg, o, err
	}
	if fs.NArg() > 0 {
		return cfg, o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	fs.Visit(func(f *flag.Flag) { o.ceph.confGiven = o.ceph.confGiven || f.Name == "ceph-conf" })
	if err := o.logLevel.UnmarshalText([]byte(*level)); err != nil {
		return cfg, o, fmt.Errorf("--log-level %q: want debug, info, warn or error", *level)
	}
	if o.logFormat != "text" && o.logFormat != "json" {
		return cfg, o, fmt.Errorf("--log-format %q: want text or json", o.logFormat)
	}
	if o.version {
		return cfg, o, nil
	}
	if !cfg.Controller && !cfg.Node {
		return cfg, o, errors.New("give --controller, --node or both")
	}
	if o.domainLabels != "" && !cfg.Node {
		return cfg, o, errors.New("--domainlabels is for the node service (--node)")
	}
	if (o.readAffinity || o.crushLabels != "") && !cfg.Node {
		return cfg, o, errors.New("--enable-read-affinity and --crush-location-labels are for the node service (--node)")
	}
	if cfg.Node && cfg.NodeID == "" {
		return cfg, o, errors.New("--node needs --nodeid")
	}
	if err := o.kubelet.check(cfg); err != nil {
		return cfg, o, err
	}
	if cfg.SweepInterval < 0 {
		return cfg, o, errors.New("--sweep-interval is negative")
	}
	if cfg.ClusterCheckInterval <= 0 {
		return cfg, o, errors.New("--cluster-check-interval must be positive")
	}
	if o.secretsDir != "" {
		cfg.Credentials = csi.CredentialsFromDir(o.secretsDir)
	}
	cfg.Version = buildinfo.Version()
	return cfg, o, nil
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg, o, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "purerbd-csi: %v\n", err)
		return 2
	}
	if o.version {
		fmt.Fprintf(stdout, "purerbd-csi %s\n", buildinfo.Version())
		return 0
	}
	hopts := &slog.HandlerOptions{Level: o.logLevel}
	var h slog.Handler = slog.NewTextHandler(stderr, hopts)
	if o.logFormat == "json" {
		h = slog.NewJSONHandler(stderr, hopts)
	}
	cfg.Logger = slog.New(h)
	cfg.Secrets = kubeSecrets(cfg.Logger, kubeapi.ServiceAccountDir)
	// The node plugin proves its predecessor on this node dead and
	// learns its RADOS clients, to fence them and take their locks over
	// at once (internal/predecessor).
	var claim *predecessor.Claim
	if cfg.Node {
		claim = takeNodeRole(ctx, cfg.Logger, o.node.stateDir)
		if claim != nil {
			defer claim.Close()
		}
	}
	// The node's labels, for its topology (--domainlabels) and its CRUSH
	// location (read affinity), read once at start.
	var labels map[string]string
	if cfg.Node {
		var err error
		if labels, err = nodeLabelsAtStart(ctx, cfg.Logger, o, cfg.NodeID, cfg.ClusterConfigPath, kubeapi.ServiceAccountDir); err != nil {
			cfg.Logger.Error("cannot start", "error", err.Error())
			return 1
		}
	}
	// One store for both roles: the controller's sessions and the node's
	// images share connections.
	store, err := newStore(cfg.Logger, o, claim, cfg.Node, labels)
	if err != nil {
		cfg.Logger.Error("cannot start", "error", err.Error())
		return 1
	}
	defer store.Close()
	if cfg.Controller {
		cfg.Store = store
	}
	var reg *prometheus.Registry
	if o.kubelet.metricsAddr != "" {
		r, m, err := newMetrics(store)
		if err != nil {
			cfg.Logger.Error("cannot start", "error", err.Error())
			return 1
		}
		reg, cfg.Metrics = r, m
		o.kubelet.metrics = metricsHandler(reg, cfg.Logger, o.kubelet.profiling)
	}
	if cfg.Node {
		topo, err := csi.TopologyFromLabels(o.domainLabels, labels, cfg.DriverName)
		if err == nil && topo != nil {
			cfg.Logger.Info("node topology from its labels", "domain_labels", o.domainLabels, "topology", topo)
		}
		if err != nil {
			cfg.Logger.Error("cannot start", "error", err.Error())
			return 1
		}
		cfg.Topology = topo
		n, err := csi.NewNodeServer(csi.NodeConfig{
			NodeID:            cfg.NodeID,
			Topology:          cfg.Topology,
			MaxVolumes:        o.node.maxVolumes,
			ClusterConfigPath: cfg.ClusterConfigPath,
			KMSConfigPath:     cfg.KMSConfigPath,
			Secrets:           cfg.Secrets,
			Opener:            store,
			Store:             store,
			Credentials:       cfg.Credentials,
			StateDir:          o.node.stateDir,
			Tools:             csi.Tools{Dir: o.node.toolsDir, Root: o.node.hostRoot},
			Conns:             o.node.conns,
			DeviceType:        o.node.deviceType,
			IOTimeout:         o.node.ioTimeout,
			MinIOTimeout:      o.node.ioMin,
			ResendInterval:    o.node.resend,
			ReattachTimeout:   o.node.reattach,
			TookOver:          settleWhenDone(claim, cfg.Logger),
			Logger:            cfg.Logger,
			Metrics:           cfg.Metrics,
		})
		if err != nil {
			cfg.Logger.Error("cannot start", "error", err.Error())
			return 1
		}
		cfg.NodeServer = n
	}
	d := csi.NewDriver(cfg)
	if reg != nil && cfg.Controller {
		if err := reg.Register(&clusterCollector{status: d.ClusterStatus}); err != nil {
			cfg.Logger.Error("cannot start", "error", err.Error())
			return 1
		}
	}
	if err := serveWithKubelet(ctx, cfg, o.kubelet, d.Run); err != nil {
		cfg.Logger.Error("stopped", "error", strings.TrimPrefix(err.Error(), "csi: "))
		return 1
	}
	cfg.Logger.Info("stopped")
	return 0
}
