package monc

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/purerbd/purerbd/rados/auth"
	"github.com/purerbd/purerbd/rados/denc"
	"github.com/purerbd/purerbd/rados/msgr"
)

// Pauses between hunting rounds that all failed: they start here and
// double up to Config.HuntBackoffMax.
const huntBackoffMin = 250 * time.Millisecond

// hunt dials monitors until one session authenticates. initial is set for
// the first hunt of New: there a failure retrying cannot cure (a refused
// key, no common connection mode) ends the hunt at once. After a lost
// session the client hunts until Close, whatever the failures, with
// growing pauses. The error is a *HuntError.
func (c *Client) hunt(ctx context.Context, initial bool) (established, error) {
	backoff := huntBackoffMin
	var order []string
	last := map[string]error{}
	failed := func(reason error) error {
		he := &HuntError{Reason: reason}
		for _, a := range order {
			he.Attempts = append(he.Attempts, Attempt{Addr: a, Err: last[a]})
		}
		return he
	}
	for round := 0; ; round++ {
		if round > 0 {
			// jitter of ±20% keeps many clients from hunting in step
			pause := time.Duration(float64(backoff) * (0.8 + 0.4*rand.Float64()))
			t := time.NewTimer(pause)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return established{}, failed(ctx.Err())
			}
			backoff = min(2*backoff, c.cfg.HuntBackoffMax)
		}
		win, attempts, fatal := c.huntRound(ctx, c.huntAddrs())
		if win.conn != nil {
			return win, nil
		}
		for _, a := range attempts {
			prev, seen := last[a.Addr]
			if !seen {
				order = append(order, a.Addr)
			}
			// an attempt the end of the hunt cut short ("i/o timeout")
			// tells less than how the address failed before (refused)
			if a.cut && prev != nil {
				continue
			}
			last[a.Addr] = a.Err
		}
		if fatal != nil && initial {
			return established{}, failed(fatal)
		}
		if err := ctx.Err(); err != nil {
			return established{}, failed(err)
		}
		lvl := c.log.Debug
		if round == 0 || fatal != nil {
			lvl = c.log.Warn
		}
		lvl("monc: no monitor answered; hunting again", "round", round+1, "err", failed(nil))
	}
}

// finalError reports whether a failed handshake would fail the same way
// with every monitor and every retry.
func finalError(err error) bool {
	return errors.Is(err, auth.ErrAuthFailed) || errors.Is(err, msgr.ErrModeRefused) ||
		errors.Is(err, msgr.ErrMissingFeatures)
}

// huntAddrs returns the monitors to try: those of the MonMap that have a
// msgr2 address, else the configured ones.
func (c *Client) huntAddrs() []denc.EntityAddr {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []denc.EntityAddr
	if c.monmap != nil {
		for _, mi := range c.monmap.ByRank() {
			if a, ok := mi.Addrs.Msgr2(); ok && a.Port != 0 {
				out = append(out, a)
			}
		}
	}
	if len(out) == 0 {
		out = append(out, c.initial...)
	}
	return out
}

// established is a monitor connection that authenticated, with the
// cephx server challenge of its handshake (see attemptAuth).
type established struct {
	conn      *msgr.Conn
	challenge uint64
}

// dialResult is the outcome of one handshake.
type dialResult struct {
	addr denc.EntityAddr
	id   *identity
	est  established
	err  error
	cut  bool // failed after the hunt's context ended
}

// ended reports whether ctx is done or its deadline has passed: a
// socket deadline taken from ctx can fire a moment before ctx's own
// timer does.
func ended(ctx context.Context) bool {
	dl, ok := ctx.Deadline()
	return ctx.Err() != nil || ok && !time.Now().Before(dl)
}

// roundAttempt is a failed handshake of a hunting round.
type roundAttempt struct {
	Attempt
	cut bool // failed after the hunt's context ended, maybe because of it
}

// huntRound tries addrs in random order, up to HuntParallel at a time,
// starting the next as soon as one fails. The first session established
// wins; the others are cancelled or closed. It returns the winner, or
// the failures and, if one is final, that one.
//
// Attempts share the client's identity when it can reclaim its global
// id; otherwise each gets a fresh one and the winner's becomes the
// client's (see identity).
func (c *Client) huntRound(ctx context.Context, addrs []denc.EntityAddr) (established, []roundAttempt, error) {
	rand.Shuffle(len(addrs), func(i, j int) { addrs[i], addrs[j] = addrs[j], addrs[i] })
	cur := c.identity()
	shared := cur.canReclaim(time.Now())
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	results := make(chan dialResult, len(addrs))
	next, inflight := 0, 0
	launch := func() {
		a := addrs[next]
		next++
		inflight++
		id := cur
		if !shared {
			var err error
			if id, err = newIdentity(c.cfg); err != nil {
				results <- dialResult{addr: a, err: err}
				return
			}
		}
		prov := &attemptAuth{Provider: id.prov}
		cfg := c.msgrConfig(prov)
		go func() {
			dctx, dcancel := context.WithTimeout(rctx, c.cfg.HuntAttemptTimeout)
			defer dcancel()
			conn, err := msgr.DialAddr(dctx, a, cfg)
			results <- dialResult{addr: a, id: id, est: established{conn: conn, challenge: prov.challenge}, err: err,
				cut: err != nil && ended(ctx)}
		}()
	}
	for inflight < c.cfg.HuntParallel && next < len(addrs) {
		launch()
	}
	var win established
	var attempts []roundAttempt
	var fatal error
	for inflight > 0 {
		r := <-results
		inflight--
		switch {
		case r.err == nil && win.conn == nil:
			win = r.est
			c.id.Store(r.id)
			cancel()
		case r.err == nil:
			r.est.conn.Close()
		case win.conn == nil && fatal == nil:
			attempts = append(attempts, roundAttempt{Attempt{Addr: r.addr.AddrPort().String(), Err: r.err}, r.cut})
			c.log.Debug("monc: monitor handshake failed", "mon", r.addr.String(), "err", r.err)
			if finalError(r.err) {
				fatal = r.err
				cancel()
			} else if rctx.Err() == nil && next < len(addrs) {
				launch()
			}
		}
	}
	return win, attempts, fatal
}
