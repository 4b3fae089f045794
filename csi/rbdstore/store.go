// Package rbdstore is the csi.ImageStore of production, and the node
// service's csi.ImageOpener: sessions on Ceph clusters and open images
// through packages rados and rbd. Connections are cached per cluster,
// monitors and user, shared by the controller's sessions and the node's
// images, and closed after an idle time once no image uses them.
package rbdstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/purerbd/purerbd/csi"
	"github.com/purerbd/purerbd/internal/bufpool"
	"github.com/purerbd/purerbd/internal/predecessor"
	"github.com/purerbd/purerbd/rados"
	"github.com/purerbd/purerbd/rados/denc"
	"github.com/purerbd/purerbd/rados/netnsdial"
	"github.com/purerbd/purerbd/rbd"
)

// Options tune a Store.
type Options struct {
	// Logger receives diagnostics; slog.Default() if nil.
	Logger *slog.Logger
	// IdleTimeout closes connections unused for that long (default 30
	// minutes).
	IdleTimeout time.Duration
	// ConnectTimeout bounds connecting to a cluster (default 30 s).
	ConnectTimeout time.Duration
	// OpTimeout bounds each RADOS operation without a deadline of its
	// own (default 2 minutes).
	OpTimeout time.Duration
	// Conf is a ceph.conf, such as the one ceph-csi's ceph-config
	// ConfigMap provides at /etc/ceph/ceph.conf; nil for none. The
	// connection modes of each user come from it: ms_mon_client_mode
	// towards monitors and ms_client_mode towards OSDs, looked up in
	// [client.<id>], [client] and [global]. Where it sets none, Ceph's
	// defaults apply: monitors secure first, OSDs crc first.
	Conf *rados.ConfFile
	// MsMode, when set, is the connection mode towards monitors and
	// OSDs alike, whatever Conf says: "crc", "secure", "prefer-crc" or
	// "prefer-secure", as rbd map's ms_mode.
	MsMode string
	// Predecessor, in the node plugin, is its claim on the node's role:
	// each new connection is recorded in it before it takes any lock, and
	// fences (blocklists) the clients of the dead previous plugin on its
	// cluster, whose exclusive locks the images it opens then break at
	// once (rbd.OpenOptions.Fencing: the images open while the monitors
	// commit the fencing, and wait for it only to break a lock). Nil: no
	// fencing, and a dead owner's lock is broken when its watch times
	// out.
	Predecessor *predecessor.Claim
	// NetNamespaces makes the connections to a cluster with a
	// NetNamespace from inside that network namespace (the node plugin,
	// as ceph-csi's netNamespaceFilePath); otherwise it is ignored.
	NetNamespaces bool
	// ReadAffinity and CrushLocationLabels localize the node's image
	// reads (--enable-read-affinity, --crush-location-labels): they go
	// to the OSD nearest to the node's CRUSH location, made from these
	// of NodeLabels (csi.CrushLocation). A cluster's own readAffinity in
	// config.json, when enabled, overrides them, as in ceph-csi.
	ReadAffinity        bool
	CrushLocationLabels []string
	NodeLabels          map[string]string
}

// crushLocation is where the node sits in c's CRUSH map for localized
// reads; nil reads from the primaries.
func (o Options) crushLocation(c csi.Cluster) map[string]string {
	var labels []string
	if o.ReadAffinity {
		labels = o.CrushLocationLabels
	}
	if c.ReadAffinity {
		labels = c.CrushLocationLabels
	}
	return csi.CrushLocation(labels, o.NodeLabels)
}

// Check reports connection modes that o sets and the client does not
// know, in MsMode and in Conf's [client] and [global] sections.
func (o Options) Check() error {
	for _, m := range []struct{ what, mode string }{
		{"--ms-mode", o.MsMode},
		{"ms_mon_client_mode", o.confMode("", "ms_mon_client_mode")},
		{"ms_client_mode", o.confMode("", "ms_client_mode")},
	} {
		if err := rados.CheckMode(m.mode); err != nil {
			return fmt.Errorf("%s: %w", m.what, err)
		}
	}
	return nil
}

// confMode is option key of Conf for user ("" for any).
func (o Options) confMode(user, key string) string {
	entity := "client"
	if user != "" {
		entity += "." + user
	}
	v, _ := o.Conf.Get(entity, key)
	return v
}

// Modes returns the connection modes of user ("" for a user without a
// section of its own) towards monitors and OSDs ("": Ceph's defaults).
func (o Options) Modes(user string) (mon, osd string) {
	if o.MsMode != "" {
		return o.MsMode, o.MsMode
	}
	return o.confMode(user, "ms_mon_client_mode"), o.confMode(user, "ms_client_mode")
}

// Store is a csi.ImageStore over RADOS. It is safe for concurrent use.
type Store struct {
	opts Options
	log  *slog.Logger

	mu     sync.Mutex
	conns  map[string]*entry
	closed bool
	// dialers are the network namespaces opened, by file path; retired
	// those whose path came to name another namespace (their
	// connections may still use them)
	dialers map[string]*netnsdial.Dialer
	retired []*netnsdial.Dialer

	// claimPause, when set (tests), pauses every attempt to claim a
	// single-writer volume for a node.
	claimPause func(node string)
	// mergeBuffers lends every image OpenImage opens the buffers its
	// merged writes gather in (rbd.OpenOptions.MergeBuffers)
	mergeBuffers bufpool.Pool
}

// entry is one cached connection; its mutex serializes connecting.
type entry struct {
	mu       sync.Mutex
	conn     *rados.Conn
	lastUsed time.Time
	refs     int    // open images using conn
	cluster  string // cluster ID and user of conn, for Sessions
	user     string
	// fencing waits for the fencing of the dead predecessor's clients on
	// conn's cluster, which conn started (Options.Predecessor); nil when
	// there is none.
	fencing func(context.Context) ([]denc.EntityAddr, error)
	// snapIDs keeps a snapshot id allocated ahead of use in each pool
	// conn has taken snapshots in (none until the first), so that
	// CreateSnapshot skips the monitor's commit; closed with conn.
	snapIDs *rbd.SnapIDReserve
}

// closeTimeout bounds releasing a connection's reserved snapshot ids
// before it closes.
const closeTimeout = 10 * time.Second

// closeConn releases conn's reserved snapshot ids, then closes it.
func closeConn(conn *rados.Conn, snapIDs *rbd.SnapIDReserve, log *slog.Logger) error {
	if snapIDs != nil {
		ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
		if err := snapIDs.Close(ctx); err != nil {
			log.Warn("releasing snapshot ids allocated ahead of use", "error", err.Error())
		}
		cancel()
	}
	return conn.Close()
}

// New returns a Store.
func New(opts Options) *Store {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.IdleTimeout <= 0 {
		opts.IdleTimeout = 30 * time.Minute
	}
	if opts.ConnectTimeout <= 0 {
		opts.ConnectTimeout = 30 * time.Second
	}
	if opts.OpTimeout <= 0 {
		opts.OpTimeout = 2 * time.Minute
	}
	return &Store{opts: opts, log: opts.Logger, conns: map[string]*entry{}}
}

// Close closes every cached connection.
func (s *Store) Close() error {
	s.mu.Lock()
	conns := s.conns
	s.conns = map[string]*entry{}
	s.closed = true
	dialers := append(s.retired, slices.Collect(maps.Values(s.dialers))...)
	s.dialers, s.retired = nil, nil
	s.mu.Unlock()
	var errs []error
	defer func() {
		for _, d := range dialers {
			d.Close()
		}
	}()
	for _, e := range conns {
		e.mu.Lock()
		if e.conn != nil {
			errs = append(errs, closeConn(e.conn, e.snapIDs, s.log))
		}
		e.mu.Unlock()
	}
	return errors.Join(errs...)
}

// cacheKey identifies a connection without holding the key itself.
func cacheKey(c csi.Cluster, cred csi.Credentials) string {
	sum := sha256.Sum256([]byte(cred.Key))
	return c.ID + "\x00" + strings.Join(c.Monitors, ",") + "\x00" + c.NetNamespace + "\x00" +
		strings.Join(c.CrushLocationLabels, ",") + fmt.Sprint(c.ReadAffinity) + "\x00" + cred.ID + "\x00" + hex.EncodeToString(sum[:8])
}

// dialer returns how to open connections to c: nil for the process's
// own network namespace, else c's NetNamespace, opened again when its
// path names another namespace than before (as ceph-csi enters the path
// anew for every map).
func (s *Store) dialer(c csi.Cluster) (func(ctx context.Context, network, address string) (net.Conn, error), error) {
	if !s.opts.NetNamespaces || c.NetNamespace == "" {
		return nil, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	d := s.dialers[c.NetNamespace]
	if d != nil && !d.Current() {
		s.retired = append(s.retired, d)
		d = nil
	}
	if d == nil {
		var err error
		if d, err = netnsdial.Open(c.NetNamespace); err != nil {
			return nil, fmt.Errorf("cluster %q: netNamespaceFilePath: %w: %w", c.ID, csi.ErrUnavailable, err)
		}
		if s.dialers == nil {
			s.dialers = map[string]*netnsdial.Dialer{}
		}
		s.dialers[c.NetNamespace] = d
	}
	return d.DialContext, nil
}

func first(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func monHost(c csi.Cluster) string { return strings.Join(c.Monitors, ",") }

// Session returns a session on a cached or new connection.
func (s *Store) Session(ctx context.Context, c csi.Cluster, cred csi.Credentials) (csi.Session, error) {
	conn, e, err := s.conn(ctx, c, cred)
	if err != nil {
		return nil, err
	}
	return &session{conn: conn, snapIDs: e.snapIDs, log: s.log.With("cluster", c.ID)}, nil
}

func (s *Store) conn(ctx context.Context, c csi.Cluster, cred csi.Credentials) (*rados.Conn, *entry, error) {
	key := cacheKey(c, cred)
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, nil, fmt.Errorf("rbdstore: closed: %w", csi.ErrUnavailable)
	}
	s.evictIdle()
	e := s.conns[key]
	if e == nil {
		e = &entry{}
		s.conns[key] = e
	}
	s.mu.Unlock()

	e.mu.Lock()
	defer e.mu.Unlock()
	e.lastUsed = time.Now()
	if e.conn != nil {
		return e.conn, e, nil
	}
	cctx, cancel := context.WithTimeout(ctx, s.opts.ConnectTimeout)
	defer cancel()
	monMode, mode := s.opts.Modes(cred.ID)
	dial, err := s.dialer(c)
	if err != nil {
		s.forget(key, e)
		return nil, nil, mapErr(err)
	}
	conn, err := rados.Connect(cctx, rados.Config{
		DialContext:    dial,
		CrushLocation:  s.opts.crushLocation(c),
		MonHost:        monHost(c),
		Name:           "client." + cred.ID,
		Key:            cred.Key,
		MonMode:        monMode,
		Mode:           mode,
		ConnectTimeout: s.opts.ConnectTimeout,
		OpTimeout:      s.opts.OpTimeout,
		Logger:         s.log,
	})
	if err != nil {
		s.forget(key, e)
		if errors.Is(err, rados.ErrModeRefused) {
			err = fmt.Errorf("the monitors refuse connection mode %q (ms_mon_client_mode in ceph.conf, or --ms-mode): %w", first(monMode, "secure crc"), err)
		}
		return nil, nil, mapErr(fmt.Errorf("connecting to cluster %q as client.%s: %w", c.ID, cred.ID, err))
	}
	s.log.Info("connected to Ceph", "cluster", c.ID, "user", "client."+cred.ID, "fsid", conn.FSID(),
		"client_addr", conn.ClientAddr().String())
	if p := s.opts.Predecessor; p != nil {
		wait, err := p.AdoptAsync(cctx, conn)
		if err != nil {
			s.log.Warn("the previous node plugin's clients cannot be fenced: their locks break when their watches time out",
				"cluster", c.ID, "err", err)
		}
		e.fencing = wait
	}
	e.conn, e.cluster, e.user = conn, c.ID, "client."+cred.ID
	e.snapIDs = rbd.NewSnapIDReserve(s.log.With("cluster", c.ID))
	return conn, e, nil
}

// forget drops the cache entry e of key after a failed connect.
func (s *Store) forget(key string, e *entry) {
	s.mu.Lock()
	if s.conns[key] == e {
		delete(s.conns, key)
	}
	s.mu.Unlock()
}

// evictIdle closes connections idle for longer than IdleTimeout; s.mu
// is held.
func (s *Store) evictIdle() {
	for k, e := range s.conns {
		if !e.mu.TryLock() {
			continue // connecting or in use right now
		}
		if e.conn != nil && e.refs == 0 && time.Since(e.lastUsed) > s.opts.IdleTimeout {
			go func(conn *rados.Conn, snapIDs *rbd.SnapIDReserve) {
				fsid, addr := conn.FSID(), conn.ClientAddr()
				_ = closeConn(conn, snapIDs, s.log)
				if p := s.opts.Predecessor; p != nil {
					// closed with no image open: nothing of it to fence
					_ = p.Forget(fsid, addr)
				}
			}(e.conn, e.snapIDs)
			delete(s.conns, k)
		}
		e.mu.Unlock()
	}
}

// Reachable checks that some monitor of c accepts a connection and
// greets with the msgr2 banner; it needs no credentials.
func (s *Store) Reachable(ctx context.Context, c csi.Cluster) error {
	mons, err := rados.MonitorAddrs(ctx, monHost(c))
	if err != nil {
		return fmt.Errorf("monitors of cluster %q: %w", c.ID, err)
	}
	dial, err := s.dialer(c)
	if err != nil {
		return err
	}
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	var errs []error
	for _, m := range mons {
		err := banner(ctx, dial, m)
		if err == nil {
			return nil
		}
		errs = append(errs, err)
	}
	return fmt.Errorf("no monitor of cluster %q answers: %w: %w", c.ID, csi.ErrUnavailable, errors.Join(errs...))
}

const msgr2Banner = "ceph v2\n"

func banner(ctx context.Context, dial func(ctx context.Context, network, address string) (net.Conn, error), addr string) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	nc, err := dial(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer nc.Close()
	if dl, ok := ctx.Deadline(); ok {
		nc.SetDeadline(dl)
	}
	b := make([]byte, len(msgr2Banner))
	if _, err := io.ReadFull(nc, b); err != nil {
		return fmt.Errorf("%s: reading the banner: %w", addr, err)
	}
	if string(b) != msgr2Banner {
		return fmt.Errorf("%s: not a msgr2 monitor (banner %q)", addr, b)
	}
	return nil
}

// SessionStats describes one cached Ceph connection for monitoring.
type SessionStats struct {
	ClusterID string // the cluster config's ID
	User      string // "client.<id>"
	Images    int    // images open on it
	rados.ConnStats
}

// Sessions describes the connections the store holds now; one being
// set up is left out.
func (s *Store) Sessions() []SessionStats {
	s.mu.Lock()
	entries := make([]*entry, 0, len(s.conns))
	for _, e := range s.conns {
		entries = append(entries, e)
	}
	s.mu.Unlock()
	var out []SessionStats
	for _, e := range entries {
		if !e.mu.TryLock() {
			continue // connecting: not a session yet
		}
		conn, st := e.conn, SessionStats{ClusterID: e.cluster, User: e.user, Images: e.refs}
		e.mu.Unlock()
		if conn == nil {
			continue
		}
		st.ConnStats = conn.Stats()
		out = append(out, st)
	}
	return out
}
