// Package cephcluster boots a real, throwaway Ceph cluster from the
// Debian/Ubuntu Ceph binaries (ceph-mon, ceph-osd, optionally ceph-mgr) on
// 127.0.0.1 (or an address inside a network namespace), in a directory of its own, with cephx on and msgr2 always.
// It is the engine behind rados/radostest (for tests) and `purerbd-dev demo`.
//
// Daemons run in the foreground as children of the calling process, are
// tracked by PID only (never by name), get SIGKILL if the calling process
// dies, and are all stopped by Close.
package cephcluster

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Connection modes a cluster can be forced into.
const (
	ModeDefault = ""       // Ceph's defaults: mons prefer secure, OSDs crc
	ModeCRC     = "crc"    // every service accepts crc only
	ModeSecure  = "secure" // every service accepts secure only
)

// Object stores an OSD can use.
const (
	StoreMemstore  = "memstore"  // RAM; fastest; empty again after a SIGKILL
	StoreBluestore = "bluestore" // sparse file; survives SIGKILL
)

// Options shape a cluster. The zero value is one mon, one memstore OSD,
// Ceph's default connection modes and an "rbd" pool.
type Options struct {
	Mons        int               // number of monitors (default 1; names a, b, c, ...)
	OSDs        int               // number of OSDs (default 1)
	Mode        string            // ModeDefault, ModeCRC or ModeSecure
	MsgrV1      bool              // also bind msgr1 ports on the mons
	WithMgr     bool              // start a ceph-mgr (pg_num changes, df need one)
	ObjectStore string            // StoreMemstore (default) or StoreBluestore
	Pool        string            // replicated pool created and rbd-pool-init'ed; default "rbd"; "-" for none
	PGNum       int               // pg_num of that pool (default 16)
	Dir         string            // where the cluster lives; default a fresh temp dir (removed by Close unless KeepDir)
	KeepDir     bool              // keep Dir after Close (logs for a failed test)
	Conf        map[string]string // extra [global] options, e.g. "auth_service_ticket_ttl": "60"
	Timeout     time.Duration     // for the whole boot (default 120 s)
	// Netns, when set, names a network namespace (see package
	// radostest/netns) in which every daemon and every tool run by the
	// cluster is started, with `ip netns exec`. BindAddr must then be an
	// address inside it: Ceph's clients outside cannot reach the cluster.
	Netns string
	// BindAddr is the address every daemon binds to and mon_host names
	// (default 127.0.0.1).
	BindAddr string
	// GlibcMalloc runs the daemons with the C library's malloc, as
	// Debian builds them. By default they run with tcmalloc preloaded
	// (libtcmalloc.so.4, package libgoogle-perftools4), the allocator
	// Ceph's own packages link its daemons with: under glibc's malloc a
	// busy memstore OSD spends a third of its CPU in _int_malloc and
	// slows down as its heap fragments, so it measures the allocator
	// rather than its clients. Ceph's CLIs run by Tool and the tests are
	// never preloaded. (The daemons of the releases run from a root
	// link tcmalloc themselves, so there GlibcMalloc only drops the
	// preload.)
	GlibcMalloc bool
	// Release picks the Ceph release: ReleaseHost (the host's packages),
	// ReleaseReef (Ceph 18.2 from a Debian trixie root) or
	// ReleaseTentacle (Ceph 20.2 from a Debian sid root); a root is built
	// once into the cache and entered with chroot, and its ceph, rados
	// and rbd are the tools Tool runs. Empty means $PURERBD_CEPH, else
	// the host.
	Release string
}

// Cluster is a running cluster.
type Cluster struct {
	Dir          string   // everything lives here: conf, keyrings, daemon data, logs
	Conf         string   // path of ceph.conf; point Ceph's tools at it with -c
	AdminKeyring string   // path of the client.admin keyring
	AdminKey     string   // client.admin's secret, base64 (as in the keyring)
	MonAddrs     []string // msgr2 addresses of the mons, "BindAddr:PORT", in mon order
	MonV1Addrs   []string // msgr1 addresses when Options.MsgrV1, else nil
	MonNames     []string // "a", "b", ...
	FSID         string
	Pool         string // the pool created at boot ("" when none)
	Options      Options
	Started      time.Duration // how long the boot took until the pool was usable

	ports   *portLease
	preload string // LD_PRELOAD of the daemons ("" for none)
	root    string // chroot of every daemon and tool ("" for the host's binaries)
	mu      sync.Mutex
	daemons map[string]*daemon // by name: "mon.a", "osd.0", "mgr.x"
	order   []string
	closed  bool
}

// ErrDirInUse is returned by Start when Options.Dir already holds files:
// a new cluster's keys do not match what an earlier cluster left there
// (its monitor store, its OSDs), and the daemons would wait for each
// other until the boot timeout instead of saying so.
var ErrDirInUse = errors.New("cephcluster: the cluster directory is not empty")

// checkDirFresh returns ErrDirInUse when dir exists and holds anything;
// an absent or empty dir (or none asked for) is fine.
func checkDirFresh(dir string) error {
	if dir == "" {
		return nil
	}
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("cephcluster: %w", err)
	}
	if len(ents) > 0 {
		return fmt.Errorf("%w: %s holds %s and %d more (an earlier cluster's?): remove it or pick another", ErrDirInUse, dir, ents[0].Name(), len(ents)-1)
	}
	return nil
}

// Start boots a cluster and returns once its pool is usable. On error
// every daemon started is stopped again.
func Start(ctx context.Context, opts Options) (_ *Cluster, err error) {
	opts = withDefaults(opts)
	if err := checkDirFresh(opts.Dir); err != nil {
		return nil, err
	}
	// before the boot timeout: building a root takes minutes, once
	root, err := EnsureRoot(ctx, opts.Release)
	if err != nil {
		return nil, err
	}
	if err := checkBinaries(opts, root); err != nil {
		return nil, err
	}
	preload := ""
	if !opts.GlibcMalloc {
		if root != "" {
			preload, err = rootTCMalloc(root)
		} else {
			preload, err = findTCMalloc()
		}
		if err != nil {
			return nil, err
		}
	}
	ctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	t0 := time.Now()

	dir := opts.Dir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "purerbd-ceph-"); err != nil {
			return nil, fmt.Errorf("cephcluster: %w", err)
		}
	} else if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("cephcluster: %w", err)
	}
	c := &Cluster{
		Dir:          dir,
		Conf:         filepath.Join(dir, "ceph.conf"),
		AdminKeyring: filepath.Join(dir, "ceph.client.admin.keyring"),
		Options:      opts,
		daemons:      map[string]*daemon{},
	}
	c.preload = preload
	c.root = root
	defer func() {
		if err != nil {
			c.Options.KeepDir = true // keep logs for whoever reads the error
			_ = c.Close()
			err = fmt.Errorf("%w (logs in %s)%s", err, dir, c.logTails(20))
		}
	}()
	if root != "" {
		if err := c.prepareRoot(); err != nil {
			return nil, err
		}
	}

	nports := opts.Mons
	if opts.MsgrV1 {
		nports *= 2
	}
	if c.ports, err = leasePorts(nports); err != nil {
		return nil, err
	}
	for i := 0; i < opts.Mons; i++ {
		c.MonNames = append(c.MonNames, string(rune('a'+i)))
		c.MonAddrs = append(c.MonAddrs, net.JoinHostPort(opts.BindAddr, strconv.Itoa(c.ports.ports[i])))
		if opts.MsgrV1 {
			c.MonV1Addrs = append(c.MonV1Addrs, net.JoinHostPort(opts.BindAddr, strconv.Itoa(c.ports.ports[opts.Mons+i])))
		}
	}
	if err := c.bootstrap(ctx); err != nil {
		return nil, err
	}
	c.Started = time.Since(t0)
	return c, nil
}

func withDefaults(o Options) Options {
	if o.Mons <= 0 {
		o.Mons = 1
	}
	if o.OSDs <= 0 {
		o.OSDs = 1
	}
	if o.ObjectStore == "" {
		o.ObjectStore = StoreMemstore
	}
	if o.Pool == "" {
		o.Pool = "rbd"
	}
	if o.PGNum <= 0 {
		o.PGNum = 16
	}
	if o.Timeout <= 0 {
		o.Timeout = 120 * time.Second
	}
	if o.BindAddr == "" {
		o.BindAddr = "127.0.0.1"
	}
	if o.Release == "" {
		o.Release = os.Getenv(ReleaseEnv)
	}
	if o.Release == "" || o.Release == "pacific" {
		o.Release = ReleaseHost
	}
	return o
}

// Close stops every daemon (SIGKILL: the cluster is thrown away) and
// removes the directory unless KeepDir is set. It is safe to call twice.
func (c *Cluster) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	names := append([]string(nil), c.order...)
	c.mu.Unlock()
	var errs []error
	for i := len(names) - 1; i >= 0; i-- {
		if err := c.signalAndWait(names[i], true, 0); err != nil {
			errs = append(errs, err)
		}
	}
	if c.ports != nil {
		c.ports.release()
	}
	if !c.Options.KeepDir {
		if err := os.RemoveAll(c.Dir); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// MonHost returns the mon_host value for this cluster, as in its ceph.conf.
func (c *Cluster) MonHost() string {
	parts := make([]string, len(c.MonAddrs))
	for i, a := range c.MonAddrs {
		if c.MonV1Addrs != nil {
			parts[i] = fmt.Sprintf("[v2:%s,v1:%s]", a, c.MonV1Addrs[i])
		} else {
			parts[i] = fmt.Sprintf("[v2:%s]", a)
		}
	}
	return strings.Join(parts, ",")
}

// Daemons returns the names of the cluster's daemons in start order.
func (c *Cluster) Daemons() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.order...)
}
