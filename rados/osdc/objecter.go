package osdc

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/purerbd/purerbd/rados/auth"
	"github.com/purerbd/purerbd/rados/msgr"
	"github.com/purerbd/purerbd/rados/osdmap"
)

// MapSource is what the objecter needs from the monitor client: newer OSD
// maps on request, and the newest epoch the monitors know (to tell a pool
// that does not exist from a map that is too old to show it).
type MapSource interface {
	// RequestOSDMap asks for the OSD maps after epoch have (a full map
	// when have is 0). They are delivered to Objecter.HandleOSDMap. It
	// must not block.
	RequestOSDMap(have uint32)
	// LatestOSDMapEpoch asks the monitors for their newest OSD map epoch.
	LatestOSDMapEpoch(ctx context.Context) (uint32, error)
}

// Config configures an Objecter. Auth is required.
type Config struct {
	// Auth authenticates OSD sessions (an authorizer from the cephx OSD
	// service ticket).
	Auth auth.Provider
	// Maps supplies newer OSD maps. Without one, the objecter works with
	// the maps given to SetMap and HandleOSDMap only.
	Maps MapSource
	// Mode is the connection mode preference for OSDs.
	Mode msgr.Mode
	// Nonce identifies this client instance in its address on every OSD
	// session (0: random).
	Nonce uint32
	// Features advertised on OSD sessions (0: msgr.DefaultFeatures).
	Features uint64
	// PingInterval is how often watches are confirmed (0: 5 s).
	PingInterval time.Duration
	// DialTimeout bounds one attempt to open an OSD session (0: 10 s).
	DialTimeout time.Duration
	// KeepaliveInterval and LivenessTimeout tune OSD sessions (0: msgr's
	// defaults, 10 s and 30 s).
	KeepaliveInterval time.Duration
	LivenessTimeout   time.Duration
	// Logger receives debug events (nil: slog.Default()).
	Logger *slog.Logger
	// CrushLocation is this client's place in the CRUSH hierarchy (type
	// name -> bucket name, Ceph's crush_location: "host": "node-a",
	// "zone": "z1"). Reads flagged FlagLocalizeReads go to the acting
	// OSD nearest to it (Ceph's rbd_read_from_replica_policy=localize).
	CrushLocation map[string]string
	// DialContext opens the TCP connections to OSDs (nil: a net.Dialer).
	DialContext func(ctx context.Context, network, address string) (net.Conn, error)
	// SpliceWrites sends a request's data of 128 KiB or more to the
	// socket by reference (msgr Message.SpliceData: vmsplice and splice,
	// Linux, TCP, crc mode) instead of copying it. Off by default: it
	// saves the copy's CPU where system calls are cheap relative to
	// copies, and costs throughput where they are not (no page-table
	// isolation).
	SpliceWrites bool
}

// Objecter sends requests to OSDs and sees each one through to a reply.
// Its methods are safe for concurrent use.
type Objecter struct {
	cfg Config
	log *slog.Logger

	osdmap atomic.Pointer[osdmap.OSDMap]
	mcache atomic.Pointer[mappingCache]
	mapMu  sync.Mutex // serialises map installation and the rescans after it
	waitMu sync.Mutex
	mapCh  chan struct{} // closed and replaced whenever a map is installed

	lastTid    atomic.Uint64
	lastCookie atomic.Uint64
	stats      counters

	sessMu   sync.Mutex
	sessions map[int32]*session
	// sessView is a copy of sessions for lookups without a lock,
	// republished whenever a session is added or removed.
	sessView atomic.Pointer[map[int32]*session]

	homeMu   sync.Mutex
	homeless map[uint64]*op // requests waiting for a map that lets them go

	lingerMu sync.Mutex
	lingers  map[uint64]*linger // by cookie

	ctx    context.Context // ends at Close
	cancel context.CancelFunc
	// spawnMu orders every start of a background goroutine (spawn)
	// against Close's cancel: a goroutine is either counted in wg
	// before Close waits, or not started at all.
	spawnMu sync.Mutex
	wg      sync.WaitGroup
}

// New returns an objecter. It sends nothing until it has a map (SetMap,
// HandleOSDMap) and a request.
func New(cfg Config) (*Objecter, error) {
	if cfg.Auth == nil {
		return nil, errors.New("osdc: Config.Auth is required")
	}
	if cfg.PingInterval <= 0 {
		cfg.PingInterval = 5 * time.Second
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = 10 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Nonce == 0 {
		var b [4]byte
		if _, err := rand.Read(b[:]); err != nil {
			return nil, fmt.Errorf("osdc: random nonce: %w", err)
		}
		cfg.Nonce = binary.LittleEndian.Uint32(b[:]) | 1
	}
	ctx, cancel := context.WithCancel(context.Background())
	o := &Objecter{
		cfg:      cfg,
		log:      cfg.Logger,
		mapCh:    make(chan struct{}),
		sessions: map[int32]*session{},
		homeless: map[uint64]*op{},
		lingers:  map[uint64]*linger{},
		ctx:      ctx,
		cancel:   cancel,
	}
	o.spawn(o.tick)
	return o, nil
}

// Close stops the objecter: requests in flight fail with ErrClosed,
// watches end, sessions close. It waits for every goroutine to finish.
func (o *Objecter) Close() error {
	o.spawnMu.Lock() // from here on every spawn refuses
	o.cancel()
	o.spawnMu.Unlock()
	o.sessMu.Lock()
	sessions := make([]*session, 0, len(o.sessions))
	for _, s := range o.sessions {
		sessions = append(sessions, s)
	}
	o.sessions = map[int32]*session{}
	o.publishSessionsLocked()
	o.sessMu.Unlock()
	for _, s := range sessions {
		s.close()
	}
	o.failAll(ErrClosed)
	o.lingerMu.Lock()
	ls := make([]*linger, 0, len(o.lingers))
	for _, l := range o.lingers {
		ls = append(ls, l)
	}
	o.lingerMu.Unlock()
	for _, l := range ls {
		l.fail(ErrClosed)
	}
	o.wg.Wait()
	return nil
}

// spawn runs f in a goroutine that Close waits for, unless Close has
// begun; it reports whether f was started. Any goroutine may call it,
// including one Close does not wait for (a caller's): a WaitGroup's
// count may not rise from zero while Wait runs, so the check of the
// context and the Add happen under spawnMu, under which Close cancels
// the context.
func (o *Objecter) spawn(f func()) bool {
	o.spawnMu.Lock()
	defer o.spawnMu.Unlock()
	if o.closed() {
		return false
	}
	o.wg.Add(1)
	go func() {
		defer o.wg.Done()
		f()
	}()
	return true
}

// closed reports whether Close was called.
func (o *Objecter) closed() bool { return o.ctx.Err() != nil }

// Map returns the current OSD map (nil before the first).
func (o *Objecter) Map() *osdmap.OSDMap { return o.osdmap.Load() }

// Epoch returns the current map's epoch (0 before the first).
func (o *Objecter) Epoch() uint32 {
	if m := o.osdmap.Load(); m != nil {
		return m.Epoch
	}
	return 0
}

// mapChanged returns a channel closed when the next map is installed.
func (o *Objecter) mapChanged() <-chan struct{} {
	o.waitMu.Lock()
	defer o.waitMu.Unlock()
	return o.mapCh
}

// WaitForMap waits until the objecter has a map of at least epoch,
// asking the MapSource for it.
func (o *Objecter) WaitForMap(ctx context.Context, epoch uint32) error {
	asked := false
	for {
		ch := o.mapChanged()
		cur := o.Epoch()
		if cur >= epoch && cur > 0 {
			return nil
		}
		if !asked {
			o.requestMap()
			asked = true
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("osdc: waiting for OSD map epoch %d (have %d): %w", epoch, cur, ctx.Err())
		case <-o.ctx.Done():
			return ErrClosed
		}
	}
}

// requestMap asks the map source for maps newer than the current one.
func (o *Objecter) requestMap() {
	if o.cfg.Maps != nil && !o.closed() {
		o.cfg.Maps.RequestOSDMap(o.Epoch())
	}
}

// SetMap installs a full map (newer than the current one) and
// re-targets every request, as a map from HandleOSDMap would.
func (o *Objecter) SetMap(m *osdmap.OSDMap) {
	o.mapMu.Lock()
	defer o.mapMu.Unlock()
	if cur := o.osdmap.Load(); cur != nil && cur.Epoch >= m.Epoch {
		return
	}
	o.install(m)
}

// HandleOSDMap takes an MOSDMap (from the monitors or an OSD): it applies
// the incrementals that follow the current map (or installs the newest
// full map when there is none, or a gap), then re-targets every request.
// Maps it cannot use yet make it ask the MapSource for the missing ones.
func (o *Objecter) HandleOSDMap(msg *msgr.Message) error {
	mm, err := DecodeOSDMapMessage(msg)
	if err != nil {
		return err
	}
	o.mapMu.Lock()
	defer o.mapMu.Unlock()
	next, err := o.advance(mm)
	if cur := o.osdmap.Load(); next != nil && (cur == nil || next.Epoch > cur.Epoch) {
		o.install(next)
	}
	if err != nil || mm.Newest > o.Epoch() {
		// What we could not use, a full map from the monitors cures.
		o.requestMap()
	}
	return err
}

// advance returns the newest map mm lets us reach from the current one:
// the incrementals that follow it (or the newest full map when we have
// none, or when the incrementals do not bridge the gap). Callers hold
// mapMu.
func (o *Objecter) advance(mm *MOSDMap) (*osdmap.OSDMap, error) {
	cur := o.osdmap.Load()
	if cur != nil && mm.FSID != cur.FSID {
		return nil, fmt.Errorf("osdc: MOSDMap for cluster %s, ours is %s", mm.FSID, cur.FSID)
	}
	next := cur
	have := uint32(0)
	if cur != nil {
		have = cur.Epoch
	}
	if len(mm.Maps) > 0 {
		fulls := sortedEpochs(mm.Maps)
		newest := fulls[len(fulls)-1]
		_, bridged := mm.Incrementals[have+1]
		if newest > have && (cur == nil || !bridged) {
			full, err := osdmap.Decode(mm.Maps[newest])
			if err != nil {
				return nil, fmt.Errorf("osdc: OSD map %d: %w", newest, err)
			}
			next = full
		}
	}
	for next != nil {
		blob, ok := mm.Incrementals[next.Epoch+1]
		if !ok {
			full, ok := mm.Maps[next.Epoch+1]
			if !ok {
				break
			}
			m, err := osdmap.Decode(full)
			if err != nil {
				return next, fmt.Errorf("osdc: OSD map %d: %w", next.Epoch+1, err)
			}
			next = m
			continue
		}
		inc, err := osdmap.DecodeIncremental(blob)
		if err != nil {
			return next, fmt.Errorf("osdc: OSD map incremental %d: %w", next.Epoch+1, err)
		}
		n, err := next.Apply(inc)
		if err != nil {
			return next, fmt.Errorf("osdc: applying OSD map incremental %d: %w", next.Epoch+1, err)
		}
		next = n
	}
	return next, nil
}

// install makes m current and re-targets everything. Callers hold mapMu.
func (o *Objecter) install(m *osdmap.OSDMap) {
	o.osdmap.Store(m)
	o.stats.maps.Add(1)
	o.waitMu.Lock()
	close(o.mapCh)
	o.mapCh = make(chan struct{})
	o.waitMu.Unlock()
	o.log.Debug("osdc: new OSD map", "epoch", m.Epoch)
	o.scan(m)
}

// scan re-targets every request and watch after a map change and keeps
// the sessions in step with the map.
func (o *Objecter) scan(m *osdmap.OSDMap) {
	o.sessMu.Lock()
	sessions := make([]*session, 0, len(o.sessions))
	for _, s := range o.sessions {
		sessions = append(sessions, s)
	}
	o.sessMu.Unlock()
	var ops []*op
	for _, s := range sessions {
		ops = s.appendOps(ops)
		s.mapChanged(m)
	}
	o.homeMu.Lock()
	for _, op := range o.homeless {
		ops = append(ops, op)
	}
	o.homeMu.Unlock()
	var sends sendBatch
	for _, op := range ops {
		op.mu.Lock()
		if !op.finished {
			sends.add(op, o.placeLocked(op, m))
		}
		op.mu.Unlock()
	}
	o.sendAsync(sends)
	o.lingerMu.Lock()
	ls := make([]*linger, 0, len(o.lingers))
	for _, l := range o.lingers {
		ls = append(ls, l)
	}
	o.lingerMu.Unlock()
	for _, l := range ls {
		l.mapChanged(m)
	}
	o.closeIdleSessions(m)
}

// session returns the session to osd, opening it if needed. The common
// case takes no lock.
func (o *Objecter) session(osd int32) (*session, error) {
	if v := o.sessView.Load(); v != nil {
		if s := (*v)[osd]; s != nil {
			return s, nil
		}
	}
	return o.sessionSlow(osd)
}

// sessionSlow looks up or opens the session under sessMu, so it sees
// the removal of a session closed meanwhile.
func (o *Objecter) sessionSlow(osd int32) (*session, error) {
	o.sessMu.Lock()
	defer o.sessMu.Unlock()
	if o.closed() {
		return nil, ErrClosed
	}
	s := o.sessions[osd]
	if s == nil {
		s = newSession(o, osd)
		o.sessions[osd] = s
		o.publishSessionsLocked()
		if !o.spawn(s.run) { // Close began after the check above
			delete(o.sessions, osd)
			o.publishSessionsLocked()
			return nil, ErrClosed
		}
	}
	return s, nil
}

// publishSessionsLocked republishes the lock-free view of sessions.
func (o *Objecter) publishSessionsLocked() {
	v := maps.Clone(o.sessions)
	o.sessView.Store(&v)
}

// closeIdleSessions closes sessions to OSDs that are down or gone and
// have nothing in flight.
func (o *Objecter) closeIdleSessions(m *osdmap.OSDMap) {
	var idle []*session
	o.sessMu.Lock()
	for osd, s := range o.sessions {
		if m.IsUp(osd) {
			continue
		}
		if s.closeIfIdle() {
			delete(o.sessions, osd)
			idle = append(idle, s)
		}
	}
	if len(idle) > 0 {
		o.publishSessionsLocked()
	}
	o.sessMu.Unlock()
	for _, s := range idle {
		o.log.Debug("osdc: closed idle session", "osd", s.osd)
	}
}

// failAll finishes every request with err (Close).
func (o *Objecter) failAll(err error) {
	var ops []*op
	o.homeMu.Lock()
	for _, op := range o.homeless {
		ops = append(ops, op)
	}
	o.homeMu.Unlock()
	for _, op := range ops {
		op.mu.Lock()
		op.finishLocked(nil, err)
		op.mu.Unlock()
	}
}

// tick pings watches and, while requests wait for a map, keeps asking
// for one.
func (o *Objecter) tick() {
	t := time.NewTicker(o.cfg.PingInterval)
	defer t.Stop()
	for {
		select {
		case <-o.ctx.Done():
			return
		case <-t.C:
		}
		o.homeMu.Lock()
		waiting := len(o.homeless) > 0
		o.homeMu.Unlock()
		if waiting {
			o.requestMap()
		}
		o.lingerMu.Lock()
		ls := make([]*linger, 0, len(o.lingers))
		for _, l := range o.lingers {
			ls = append(ls, l)
		}
		o.lingerMu.Unlock()
		for _, l := range ls {
			l.ping()
		}
	}
}

// msgrConfig is the configuration of OSD sessions.
func (o *Objecter) msgrConfig() msgr.Config {
	return msgr.Config{
		Auth:              o.cfg.Auth,
		PeerType:          osdEntity,
		Mode:              o.cfg.Mode,
		Nonce:             o.cfg.Nonce,
		Features:          o.cfg.Features,
		KeepaliveInterval: o.cfg.KeepaliveInterval,
		LivenessTimeout:   o.cfg.LivenessTimeout,
		DialContext:       o.cfg.DialContext,
		Logger:            o.log,
		Counters:          &o.stats.written,
	}
}
