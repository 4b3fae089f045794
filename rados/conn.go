package rados

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"sort"
	"sync"
	"time"

	"github.com/purerbd/purerbd/rados/auth"
	"github.com/purerbd/purerbd/rados/cephconf"
	"github.com/purerbd/purerbd/rados/monc"
	"github.com/purerbd/purerbd/rados/msgr"
	"github.com/purerbd/purerbd/rados/osdc"
	"github.com/purerbd/purerbd/rados/osdmap"
)

// Config describes how to reach and authenticate to a cluster. MonHost
// and, for cephx, Key or Keyring are required. ConnectFromConf fills one
// from ceph.conf and Ceph's usual command-line options instead.
type Config struct {
	// MonHost lists the monitors in any form ceph.conf's mon_host takes
	// ("10.0.0.1,10.0.0.2", "[v2:10.0.0.1:3300/0]", "mon.example:3300").
	MonHost string
	// Name is the entity to authenticate as (empty: client.admin).
	Name string
	// Key is Name's cephx secret, base64 as in a keyring. It is never
	// logged. Keyring is a keyring file to take it from instead.
	Key     string
	Keyring string
	// AuthNone uses auth none (clusters without cephx).
	AuthNone bool
	// MonMode and Mode are the connection mode preferences towards the
	// monitors and towards OSDs: "crc", "secure", "prefer-crc",
	// "prefer-secure", or Ceph's spellings ("secure crc"). Empty: Ceph's
	// defaults (monitors secure first, OSDs crc first).
	MonMode string
	Mode    string
	// ConnectTimeout bounds Connect when ctx has no earlier deadline
	// (0: 30 s).
	ConnectTimeout time.Duration
	// OpTimeout, when not zero, bounds every object operation whose
	// context has no deadline of its own (librados'
	// rados_osd_op_timeout).
	OpTimeout time.Duration
	// Logger receives debug events (nil: slog.Default()). Secrets are
	// never logged.
	Logger *slog.Logger
	// SpliceWrites sends large write data to the OSDs by reference
	// rather than copying it into the socket (osdc.Config.SpliceWrites:
	// it saves CPU where system calls and copies are costly, and costs
	// throughput where they are not). Off by default.
	SpliceWrites bool
	// CrushLocation is this client's place in the CRUSH hierarchy (type
	// name -> bucket name, as Ceph's crush_location option), for reads
	// through IOContext.WithLocalizedReads.
	CrushLocation map[string]string
	// DialContext opens the TCP connections to monitors and OSDs (nil: a
	// net.Dialer); netnsdial.Dialer makes them from another network
	// namespace, as ceph-csi's netNamespaceFilePath does.
	DialContext func(ctx context.Context, network, address string) (net.Conn, error)
}

// Conn is a connection to a cluster: a monitor session and the OSD
// sessions opened as objects are used. It is safe for concurrent use.
type Conn struct {
	mc        *monc.Client
	ob        *osdc.Objecter
	sub       *monc.OSDMapSubscription
	opTimeout time.Duration
	ctx       context.Context
	cancel    context.CancelFunc
	wg        sync.WaitGroup
	closeOnce sync.Once
}

// Connect connects to the cluster cfg describes: it authenticates with a
// monitor, obtains the OSD map, and is then ready for object operations.
func Connect(ctx context.Context, cfg Config) (*Conn, error) {
	var mcfg monc.Config
	var err error
	if mcfg.MonAddrs, err = MonitorAddrs(ctx, cfg.MonHost); err != nil {
		return nil, fmt.Errorf("rados: mon host: %w", err)
	}
	name := cfg.Name
	if name == "" {
		name = "client.admin"
	}
	if mcfg.Name, err = auth.ParseName(name); err != nil {
		return nil, fmt.Errorf("rados: %w", err)
	}
	switch {
	case cfg.AuthNone:
		mcfg.AuthNone = true
	case cfg.Key != "":
		if mcfg.Key, err = auth.ParseKey(cfg.Key); err != nil {
			return nil, fmt.Errorf("rados: key of %s: %w", name, err)
		}
	case cfg.Keyring != "":
		kr, err := auth.ReadKeyring(cfg.Keyring)
		if err != nil {
			return nil, fmt.Errorf("rados: %w", err)
		}
		if mcfg.Key, err = kr.Key(mcfg.Name); err != nil {
			return nil, fmt.Errorf("rados: %s: %w", cfg.Keyring, err)
		}
	default:
		return nil, fmt.Errorf("rados: no key for %s: set Config.Key or Config.Keyring (or AuthNone)", name)
	}
	if mcfg.Mode, err = msgr.ParseMode(cfg.MonMode); err != nil {
		return nil, fmt.Errorf("rados: %w", err)
	}
	return connect(ctx, cfg, mcfg)
}

// ConnectFromConf connects as Ceph's tools do: settings from the
// command-line style args, CEPH_ARGS, CEPH_CONF and ceph.conf (the file
// args name, else Ceph's default locations), the key from --key,
// --keyfile or the keyrings.
func ConnectFromConf(ctx context.Context, args cephconf.Args) (*Conn, error) {
	return ConnectFromConfWith(ctx, args, Config{})
}

// ConnectFromConfWith is ConnectFromConf with the connection's own
// settings from cfg: ConnectTimeout, OpTimeout, Logger and SpliceWrites.
// Where the cluster is, who to be and the connection modes come from args
// and ceph.conf; cfg's fields for them are ignored.
func ConnectFromConfWith(ctx context.Context, args cephconf.Args, cfg Config) (*Conn, error) {
	s, err := cephconf.Resolve(args, nil)
	if err != nil {
		return nil, fmt.Errorf("rados: %w", err)
	}
	mcfg, err := monc.ConfigFromSettings(ctx, s, nil)
	if err != nil {
		return nil, fmt.Errorf("rados: %w", err)
	}
	cfg.Mode = s.Mode
	return connect(ctx, cfg, mcfg)
}

func connect(ctx context.Context, cfg Config, mcfg monc.Config) (*Conn, error) {
	mode, err := msgr.ParseMode(cfg.Mode)
	if err != nil {
		return nil, fmt.Errorf("rados: %w", err)
	}
	if cfg.ConnectTimeout <= 0 {
		cfg.ConnectTimeout = 30 * time.Second
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	mcfg.Logger = log
	if cfg.DialContext != nil {
		mcfg.DialContext = cfg.DialContext
	}
	// One nonce for the monitor and OSD sessions, as librados has one
	// address: ClientAddr is then the address OSDs record for this
	// client's locks and watches.
	if mcfg.Nonce == 0 {
		var b [4]byte
		if _, err := rand.Read(b[:]); err != nil {
			return nil, fmt.Errorf("rados: random nonce: %w", err)
		}
		mcfg.Nonce = binary.LittleEndian.Uint32(b[:]) | 1
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.ConnectTimeout)
	defer cancel()
	mc, err := monc.New(ctx, mcfg)
	if err != nil {
		return nil, fmt.Errorf("rados: %w", err)
	}
	c := &Conn{mc: mc, opTimeout: cfg.OpTimeout}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.ob, err = osdc.New(osdc.Config{
		Auth:          mc.Auth(),
		Maps:          &monMaps{mc: mc, ctx: c.ctx, wg: &c.wg},
		Mode:          mode,
		Logger:        log,
		SpliceWrites:  cfg.SpliceWrites,
		Nonce:         mcfg.Nonce,
		DialContext:   mcfg.DialContext,
		CrushLocation: cfg.CrushLocation,
	})
	if err != nil {
		c.cancel()
		mc.Close()
		return nil, fmt.Errorf("rados: %w", err)
	}
	if c.sub, err = mc.SubscribeOSDMap(0); err != nil {
		c.Close()
		return nil, fmt.Errorf("rados: %w", err)
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		for m := range c.sub.C() {
			if err := c.ob.HandleOSDMap(m); err != nil {
				log.Warn("rados: OSD map not applied", "err", err)
			}
		}
	}()
	if err := c.ob.WaitForMap(ctx, 1); err != nil {
		c.Close()
		return nil, fmt.Errorf("rados: %w", err)
	}
	return c, nil
}

// Close closes the connection: operations in flight fail with ErrClosed,
// watches end. Close waits for every goroutine of the Conn to finish.
func (c *Conn) Close() error {
	c.closeOnce.Do(func() {
		c.cancel()
		if c.sub != nil {
			c.sub.Close()
		}
		c.ob.Close()
		c.mc.Close()
		c.wg.Wait()
	})
	return nil
}

// FSID returns the cluster's fsid.
func (c *Conn) FSID() string { return c.mc.FSID().String() }

// InstanceID returns this client's global id (the N of client.N).
func (c *Conn) InstanceID() uint64 { return c.mc.GlobalID() }

// OSDMap returns the current OSD map.
func (c *Conn) OSDMap() *osdmap.OSDMap { return c.ob.Map() }

// WaitForLatestOSDMap waits until the objecter has the newest OSD map the
// monitors know (for instance after creating a pool).
func (c *Conn) WaitForLatestOSDMap(ctx context.Context) error {
	n, _, err := c.mc.GetVersion(ctx, "osdmap")
	if err != nil {
		return fmt.Errorf("rados: %w", err)
	}
	return c.ob.WaitForMap(ctx, uint32(n))
}

// MonCommand runs a monitor command given as JSON, e.g.
// {"prefix": "osd pool ls", "format": "json"}, and returns its output
// and status string. A refused command returns an error matching the
// errno (errors.Is(err, ErrNotFound)...).
func (c *Conn) MonCommand(ctx context.Context, cmd []byte) (out []byte, status string, err error) {
	return c.MonCommandWithInput(ctx, cmd, nil)
}

// MonCommandWithInput is MonCommand with an input buffer (ceph -i).
func (c *Conn) MonCommandWithInput(ctx context.Context, cmd, in []byte) (out []byte, status string, err error) {
	out, status, err = c.mc.Command(ctx, []string{string(cmd)}, in)
	if err != nil {
		return out, status, fmt.Errorf("rados: %w", err)
	}
	return out, status, nil
}

// monCommandJSON runs a command built from a value.
func (c *Conn) monCommandJSON(ctx context.Context, cmd any) ([]byte, error) {
	b, err := json.Marshal(cmd)
	if err != nil {
		return nil, fmt.Errorf("rados: %w", err)
	}
	out, _, err := c.MonCommand(ctx, b)
	return out, err
}

// ListPools returns the names of the pools, sorted.
func (c *Conn) ListPools(ctx context.Context) ([]string, error) {
	if err := c.WaitForLatestOSDMap(ctx); err != nil {
		return nil, err
	}
	m := c.ob.Map()
	names := make([]string, 0, len(m.PoolNames))
	for _, n := range m.PoolNames {
		names = append(names, n)
	}
	sort.Strings(names)
	return names, nil
}

// LookupPool returns the id of the named pool.
func (c *Conn) LookupPool(ctx context.Context, name string) (int64, error) {
	if id, ok := c.ob.Map().PoolByName(name); ok {
		return id, nil
	}
	// The pool may be newer than our map.
	if err := c.WaitForLatestOSDMap(ctx); err != nil {
		return 0, err
	}
	if id, ok := c.ob.Map().PoolByName(name); ok {
		return id, nil
	}
	return 0, fmt.Errorf("rados: pool %q: %w", name, ErrPoolNotFound)
}

// CreatePool creates a replicated pool with the cluster's defaults.
func (c *Conn) CreatePool(ctx context.Context, name string) error {
	if _, err := c.monCommandJSON(ctx, map[string]any{"prefix": "osd pool create", "pool": name}); err != nil {
		return err
	}
	return c.WaitForLatestOSDMap(ctx)
}

// DeletePool deletes a pool (the monitors must allow it:
// mon_allow_pool_delete).
func (c *Conn) DeletePool(ctx context.Context, name string) error {
	_, err := c.monCommandJSON(ctx, map[string]any{"prefix": "osd pool delete", "pool": name, "pool2": name,
		"yes_i_really_really_mean_it": true})
	if err != nil {
		return err
	}
	return c.WaitForLatestOSDMap(ctx)
}

// IOContext returns an I/O context for a pool and a namespace ("" for
// the default namespace).
func (c *Conn) IOContext(ctx context.Context, pool, namespace string) (*IOContext, error) {
	id, err := c.LookupPool(ctx, pool)
	if err != nil {
		return nil, err
	}
	return &IOContext{conn: c, pool: id, poolName: pool, ns: namespace}, nil
}

// opContext applies the Conn's default operation timeout.
func (c *Conn) opContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if c.opTimeout > 0 {
		if _, ok := ctx.Deadline(); !ok {
			return context.WithTimeout(ctx, c.opTimeout)
		}
	}
	return ctx, func() {}
}
