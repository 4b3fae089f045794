package monc

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"log/slog"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/purerbd/purerbd/rados/auth"
	"github.com/purerbd/purerbd/rados/denc"
	"github.com/purerbd/purerbd/rados/msgr"
)

// Client is a session with the monitors of one cluster, kept open until
// Close. New hunts for a monitor (several at once, the first to
// authenticate wins), fetches the MonMap and keeps it current. Behind
// the caller's back the client then renews cephx tickets before they
// expire, follows subscriptions (osdmap, monmap, config), and when the
// monitor fails or goes silent hunts for another one, subscribes again
// from the epochs it already has and resends the commands still waiting
// for an answer.
//
// All methods are safe for concurrent use.
type Client struct {
	cfg     Config
	log     *slog.Logger
	id      atomic.Pointer[identity]
	initial []denc.EntityAddr
	nonce   uint32
	seq     atomic.Uint64 // connection attempts, for msgr's global_seq

	ctx       context.Context // ends at Close
	cancel    context.CancelFunc
	wg        sync.WaitGroup
	closeOnce sync.Once
	kick      chan struct{} // wakes the session loop: a ticket renewal is wanted
	drop      chan struct{} // asks the session loop to drop the session and hunt

	mu            sync.Mutex
	conn          *msgr.Conn      // the current session; nil while hunting
	lastAddr      denc.EntityAddr // conn's LocalAddr, kept while hunting
	challenge     uint64          // the cephx server challenge of conn's handshake
	sessions      int             // sessions established since New
	lostAt        time.Time       // when the last session was lost
	lastFailover  time.Duration
	monmap        *MonMap
	monmapChanged chan struct{} // closed and replaced at every new MonMap
	subs          map[string]subItem
	subRenewAt    time.Time // for monitors without stateful subscriptions
	osdSub        *OSDMapSubscription
	osdEpoch      uint32
	central       map[string]string
	lastTid       uint64
	requests      map[uint64]*request
	osdWaiters    map[*osdWaiter]struct{}
	renewSent     time.Time // when the pending ticket renewal went out; zero for none
	renewWaiters  []chan error
}

// tickInterval paces ticket renewal checks and subscription renewals.
const tickInterval = time.Second

// New connects to the monitors described by cfg: it hunts until a
// monitor session authenticates and the MonMap has arrived, within ctx
// and cfg.ConnectTimeout. A refused key or identity fails at once with
// an error wrapping auth.ErrAuthFailed; monitors that cannot be reached
// give a *HuntError naming every address tried.
func New(ctx context.Context, cfg Config) (*Client, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	initial, err := parseMonAddrs(cfg.MonAddrs)
	if err != nil {
		return nil, err
	}
	c := &Client{
		cfg:           cfg,
		log:           cfg.Logger,
		initial:       initial,
		kick:          make(chan struct{}, 1),
		drop:          make(chan struct{}, 1),
		monmapChanged: make(chan struct{}),
		subs:          map[string]subItem{"monmap": {}},
		requests:      map[uint64]*request{},
		osdWaiters:    map[*osdWaiter]struct{}{},
	}
	if cfg.SubscribeConfig {
		c.subs["config"] = subItem{}
	}
	id, err := newIdentity(cfg)
	if err != nil {
		return nil, err
	}
	c.id.Store(id)
	c.nonce = cfg.Nonce
	if c.nonce == 0 {
		var b [4]byte
		if _, err := rand.Read(b[:]); err != nil {
			return nil, fmt.Errorf("monc: random nonce: %w", err)
		}
		c.nonce = binary.LittleEndian.Uint32(b[:]) | 1
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())

	hctx, cancel := context.WithTimeout(ctx, cfg.ConnectTimeout)
	defer cancel()
	t0 := time.Now()
	est, err := c.hunt(hctx, true)
	if err != nil {
		c.cancel()
		return nil, err
	}
	c.wg.Add(1)
	go c.run(est)
	if err := c.waitMonMap(hctx); err != nil {
		c.Close()
		return nil, fmt.Errorf("monc: waiting for the monmap from mon %s: %w", est.conn.PeerAddrs(), err)
	}
	c.log.Debug("monc: connected", "after", time.Since(t0).Round(time.Millisecond))
	return c, nil
}

// Close ends the session and stops every goroutine of the client.
// Calls waiting on the client return ErrClosed. Close is idempotent.
func (c *Client) Close() error {
	c.closeOnce.Do(c.cancel)
	c.wg.Wait()
	return nil
}

// waitMonMap waits until a MonMap has been received.
func (c *Client) waitMonMap(ctx context.Context) error {
	for {
		c.mu.Lock()
		have, ch := c.monmap != nil, c.monmapChanged
		c.mu.Unlock()
		if have {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		case <-c.ctx.Done():
			return ErrClosed
		}
	}
}

// MonMap returns the newest MonMap received. The map must not be
// modified; the client replaces it, never changes it.
func (c *Client) MonMap() *MonMap {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.monmap
}

// FSID returns the cluster's fsid, from the MonMap.
func (c *Client) FSID() denc.UUID {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.monmap == nil {
		return denc.UUID{}
	}
	return c.monmap.FSID
}

// Auth returns the authentication provider of this client's identity,
// for connections to OSDs and managers (msgr.Config.Auth): its
// authorizers carry the service tickets the client keeps renewed. When a
// service refuses an authorizer or msgr reports auth.ErrNoTicket, call
// RenewTickets and dial again.
func (c *Client) Auth() auth.Provider { return providerSwitch{c} }

// Addr returns this client's address as the current monitor session
// sees it: the IP the monitor reported, no port, this client's nonce.
// Before the first session, and while hunting, the IP is the last one
// seen (unspecified before any).
func (c *Client) Addr() denc.EntityAddr {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conn != nil {
		c.lastAddr = c.conn.LocalAddr()
	}
	if c.lastAddr.IsZero() {
		return denc.NewEntityAddr(denc.AddrAny, netip.AddrPortFrom(netip.IPv4Unspecified(), 0), c.nonce)
	}
	return c.lastAddr
}

// GlobalID returns the global id the monitors assigned to this client
// (the N of client.N), as presented to OSDs and managers.
func (c *Client) GlobalID() uint64 { return c.identity().globalID() }

// SessionInfo describes the current monitor session.
type SessionInfo struct {
	Connected bool
	Mon       string          // the monitor's name in the MonMap ("" when not found)
	Addr      denc.EntityAddr // its address
	Mode      msgr.ConnMode
	GlobalID  uint64 // the global id this session authenticated with
	// Sessions counts the sessions established since New: 1 plus the
	// number of failovers.
	Sessions int
	// LastFailover is how long the last hunt after a lost session took,
	// from the loss to the new session (0 before any failover).
	LastFailover time.Duration
}

// Session describes the current monitor session.
func (c *Client) Session() SessionInfo {
	c.mu.Lock()
	defer c.mu.Unlock()
	si := SessionInfo{Sessions: c.sessions, LastFailover: c.lastFailover}
	if c.conn == nil {
		return si
	}
	si.Connected = true
	si.Mode = c.conn.Mode()
	si.GlobalID = c.conn.GlobalID()
	peer := c.conn.PeerAddrs()
	if a, ok := peer.Msgr2(); ok {
		si.Addr = a
	} else if len(peer) > 0 {
		si.Addr = peer[0]
	}
	si.Mon = c.monNameLocked(peer)
	return si
}

// monNameLocked finds the MonMap name of a monitor by its addresses.
func (c *Client) monNameLocked(addrs denc.EntityAddrVec) string {
	if c.monmap == nil {
		return ""
	}
	for name, mi := range c.monmap.Mons {
		for _, a := range mi.Addrs {
			for _, b := range addrs {
				if a.AddrPort() == b.AddrPort() {
					return name
				}
			}
		}
	}
	return ""
}

// CentralConfig returns the options the monitors' central configuration
// holds for this client (Config.SubscribeConfig), or nil before any
// arrived.
func (c *Client) CentralConfig() map[string]string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.central == nil {
		return nil
	}
	out := make(map[string]string, len(c.central))
	for k, v := range c.central {
		out[k] = v
	}
	return out
}

// msgrConfig is the messenger configuration of a monitor connection
// authenticating with prov.
func (c *Client) msgrConfig(prov auth.Provider) msgr.Config {
	return msgr.Config{
		Auth:              prov,
		PeerType:          denc.EntityTypeMon,
		Mode:              c.cfg.Mode,
		Nonce:             c.nonce,
		GlobalSeq:         c.seq.Add(1),
		KeepaliveInterval: c.cfg.KeepaliveInterval,
		LivenessTimeout:   c.cfg.LivenessTimeout,
		DialContext:       c.cfg.DialContext,
		Logger:            c.log,
	}
}
