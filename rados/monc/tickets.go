package monc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/purerbd/purerbd/rados/auth"
	"github.com/purerbd/purerbd/rados/msgr"
)

// renewTickets sends a cephx renewal request over the session when a
// ticket is missing or in the last quarter of its life and no renewal
// is already on its way. Waiters of RenewTickets are released when
// nothing is due.
func (c *Client) renewTickets(conn *msgr.Conn) {
	cx := c.identity().cephx
	if cx == nil {
		c.finishRenewal(nil)
		return
	}
	c.mu.Lock()
	pending := !c.renewSent.IsZero() && time.Since(c.renewSent) < c.cfg.RenewRetry
	challenge := c.challenge
	c.mu.Unlock()
	if pending {
		return
	}
	if !cx.NeedRenewal() {
		c.finishRenewal(nil)
		return
	}
	payload, err := cx.BuildRenewalRequest(challenge)
	if err != nil {
		c.log.Warn("monc: building ticket renewal", "err", err)
		c.finishRenewal(err)
		return
	}
	if payload == nil {
		c.finishRenewal(nil)
		return
	}
	c.mu.Lock()
	c.renewSent = time.Now()
	var epoch uint32
	if c.monmap != nil {
		epoch = c.monmap.Epoch
	}
	c.mu.Unlock()
	c.log.Debug("monc: renewing tickets")
	c.send(c.ctx, conn, msgr.Message{Type: msgAuth, Version: 1, Front: encodeAuth(uint32(auth.MethodCephX), payload, epoch)})
}

// nextTick returns how long the session loop may sleep: until the next
// ticket is due for renewal, at most tickInterval.
func (c *Client) nextTick() time.Duration {
	cx := c.identity().cephx
	c.mu.Lock()
	pending := !c.renewSent.IsZero()
	c.mu.Unlock()
	if cx == nil || pending {
		return tickInterval
	}
	d := tickInterval
	now := time.Now()
	for _, t := range cx.Tickets() {
		d = min(d, t.RenewAfter.Sub(now))
	}
	return max(d, 10*time.Millisecond)
}

// handleAuthReply stores the tickets of a renewal. A refusal for now
// (auth.ErrTryAgain: EBUSY, EAGAIN) is retried on the same session after
// Config.RenewRetry; any other failure drops the session: the handshake
// with the next monitor authenticates afresh.
func (c *Client) handleAuthReply(m *msgr.Message) {
	cx := c.identity().cephx
	r, err := decodeAuthReply(m.Front)
	switch {
	case err != nil:
	case r.result < 0:
		reason := "the monitor refused to renew tickets"
		if r.msg != "" {
			reason += " (" + r.msg + ")"
		}
		err = fmt.Errorf("monc: %w", auth.Refused(c.cfg.Name, "mon", reason, r.result))
	case cx != nil:
		err = cx.HandleRenewalReply(r.payload)
	}
	later := errors.Is(err, auth.ErrTryAgain)
	c.mu.Lock()
	c.renewSent = time.Time{}
	if later {
		c.renewSent = time.Now() // counts as pending until RenewRetry has passed
	}
	c.mu.Unlock()
	if later {
		c.log.Info("monc: ticket renewal refused for now; retrying later", "err", err, "after", c.cfg.RenewRetry)
		c.finishRenewal(err)
		return
	}
	if err != nil {
		c.log.Warn("monc: ticket renewal failed; re-authenticating with a new session", "err", err)
		select {
		case c.drop <- struct{}{}:
		default:
		}
		c.finishRenewal(err)
		return
	}
	if cx != nil && c.log.Enabled(context.Background(), slog.LevelDebug) {
		for _, t := range cx.Tickets() {
			c.log.Debug("monc: ticket", "service", t.Service.String(), "expires", t.Expires.Format(time.RFC3339))
		}
	}
	c.finishRenewal(nil)
}

// finishRenewal releases the RenewTickets waiters.
func (c *Client) finishRenewal(err error) {
	c.mu.Lock()
	ws := c.renewWaiters
	c.renewWaiters = nil
	c.mu.Unlock()
	for _, w := range ws {
		w <- err
	}
}

// RenewTickets renews the cephx tickets that are missing or due (for
// example after a service refused an authorizer, which drops its ticket)
// and waits for the monitor's answer. It returns at once when every
// ticket is fresh, and does nothing with auth none.
func (c *Client) RenewTickets(ctx context.Context) error {
	if cx := c.identity().cephx; cx == nil || !cx.NeedRenewal() {
		return nil
	}
	ch := make(chan error, 1)
	c.mu.Lock()
	if c.ctx.Err() != nil {
		c.mu.Unlock()
		return ErrClosed
	}
	c.renewWaiters = append(c.renewWaiters, ch)
	c.mu.Unlock()
	select {
	case c.kick <- struct{}{}:
	default:
	}
	select {
	case err := <-ch:
		return err
	case <-ctx.Done():
		return fmt.Errorf("monc: renewing tickets: %w", ctx.Err())
	case <-c.ctx.Done():
		return ErrClosed
	}
}

// Tickets describes the cephx tickets held (nil with auth none).
func (c *Client) Tickets() []auth.TicketInfo {
	if cx := c.identity().cephx; cx != nil {
		return cx.Tickets()
	}
	return nil
}
