package monc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/purerbd/purerbd/rados/auth"
	"github.com/purerbd/purerbd/rados/denc"
	"github.com/purerbd/purerbd/rados/msgr"
	"github.com/purerbd/purerbd/rados/radostest"
)

// osdAddr returns osd.0's msgr2 address, with its nonce, from ceph.
func osdAddr(t testing.TB, ctx context.Context, cl *radostest.Cluster) string {
	t.Helper()
	out, err := cl.Ceph(ctx, "osd", "dump", "-f", "json")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		OSDs []struct {
			PublicAddrs struct {
				AddrVec []struct {
					Type  string `json:"type"`
					Addr  string `json:"addr"`
					Nonce uint32 `json:"nonce"`
				} `json:"addrvec"`
			} `json:"public_addrs"`
		} `json:"osds"`
	}
	if err := json.Unmarshal(out, &d); err != nil {
		t.Fatal(err)
	}
	for _, o := range d.OSDs {
		for _, a := range o.PublicAddrs.AddrVec {
			if a.Type == "v2" {
				return fmt.Sprintf("v2:%s/%d", a.Addr, a.Nonce)
			}
		}
	}
	t.Fatalf("no msgr2 OSD address in %s", out)
	return ""
}

// ticketOf returns the description of the ticket for service.
func ticketOf(c *Client, service denc.EntityType) auth.TicketInfo {
	for _, ti := range c.Tickets() {
		if ti.Service == service {
			return ti
		}
	}
	return auth.TicketInfo{}
}

func osdTicket(c *Client) auth.TicketInfo { return ticketOf(c, denc.EntityTypeOSD) }

// TestTicketRenewal runs a client on a cluster whose service tickets
// live a few seconds: the client renews them (over MAuth, before they
// expire) at least twice while commands keep being answered, and the
// renewed OSD ticket opens a session with the OSD. The AUTH ticket lives
// twice as long and is renewed too, on the same session.
//
// The monitor enforces no minimum auth_service_ticket_ttl (checked on
// 16.2.15): at 0.2 s its tickets have expired before they arrive, at 1 s
// they arrive but the OSD's rotating secrets lag and it refuses them
// (EACCES). 4 s is the shortest that works reliably here.
func TestTicketRenewal(t *testing.T) {
	t.Parallel()
	const ttl = 4 * time.Second
	cl := radostest.New(t, radostest.Options{Pool: "-",
		Conf: map[string]string{"auth_service_ticket_ttl": fmt.Sprint(ttl.Seconds()), "auth_mon_ticket_ttl": fmt.Sprint(2 * ttl.Seconds())}})
	c := connect(t, adminConfig(t, cl))
	firstAuth := ticketOf(c, denc.EntityTypeAuth)
	first := osdTicket(c)
	// the validity the monitor granted, from what the client computed of
	// it (renew after three quarters), not from the clock: under load the
	// first renewal may come before this line runs
	if v := 4 * first.Expires.Sub(first.RenewAfter); v > ttl+time.Second || v < ttl/2 {
		t.Fatalf("osd ticket valid for %v, want about %v", v, ttl)
	}
	ctx := testContext(t, 2*time.Minute)
	osd := osdAddr(t, ctx, cl)
	seen := []auth.TicketInfo{first}
	deadline := time.Now().Add(5 * ttl)
	for len(seen) < 4 && time.Now().Before(deadline) {
		if _, outs, err := c.CommandJSON(ctx, map[string]any{"prefix": "status", "format": "json"}, nil); err != nil {
			t.Fatalf("status: %v (%s)", err, outs)
		}
		ti := osdTicket(c)
		if !ti.Expires.After(time.Now()) {
			t.Fatalf("osd ticket expired at %v", ti.Expires)
		}
		if last := seen[len(seen)-1]; ti.Expires.After(last.Expires) {
			seen = append(seen, ti)
			// the renewed ticket is accepted by the OSD
			t0 := time.Now()
			conn, refusals := dialOSD(t, ctx, c, osd, 2*ttl)
			deadline = deadline.Add(time.Since(t0)) // waiting for the OSD is not the client's time
			if conn.GlobalID() != c.GlobalID() {
				t.Errorf("OSD session global id %d, client %d", conn.GlobalID(), c.GlobalID())
			}
			conn.Close()
			t.Logf("renewal %d: osd ticket (secret %d) now expires %v after the previous one; OSD session ok (after %d refusals)",
				len(seen)-1, ti.SecretID, ti.Expires.Sub(last.Expires).Round(time.Millisecond), refusals)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if len(seen) < 3 {
		t.Fatalf("%d renewals in %v, want at least 2", len(seen)-1, 5*ttl)
	}
	if si := c.Session(); si.Sessions != 1 {
		t.Errorf("renewals cost a new session: %+v", si)
	}
	if a := ticketOf(c, denc.EntityTypeAuth); !a.Expires.After(firstAuth.Expires) {
		t.Errorf("AUTH ticket not renewed: expires %v, first %v", a.Expires, firstAuth.Expires)
	}
	// an explicit renewal of a dropped ticket
	if err := c.RenewTickets(ctx); err != nil {
		t.Fatal(err)
	}
}

// dialOSD opens a session with the OSD at addr with c's tickets. The
// OSD may refuse a ticket sealed with a rotating secret it has not
// fetched from the monitors yet ("could not find secret_id" in its log:
// with tickets living seconds and a loaded machine, it lags behind), as
// it would refuse any Ceph client: refusals are retried, as Ceph's
// clients do, for at most patience. It returns the session and the
// number of refusals.
func dialOSD(t *testing.T, ctx context.Context, c *Client, addr string, patience time.Duration) (*msgr.Conn, int) {
	t.Helper()
	deadline := time.Now().Add(patience)
	for refusals := 0; ; refusals++ {
		conn, err := msgr.Dial(ctx, addr, msgr.Config{Auth: c.Auth(), PeerType: denc.EntityTypeOSD, Logger: testLogger(t)})
		if err == nil {
			return conn, refusals
		}
		if !errors.Is(err, auth.ErrAuthFailed) || time.Now().After(deadline) {
			t.Fatalf("OSD session with the renewed ticket (after %d refusals): %v", refusals, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestRenewalAnswersTheSessionsChallenge renews the AUTH ticket after
// another handshake with the client's identity — what a losing attempt
// of a failover hunt does, when attempts share the identity to reclaim
// its global id. The renewal over the session must answer the
// challenge of that session's own handshake, not the latest one, or the
// monitor refuses it and the session is dropped.
func TestRenewalAnswersTheSessionsChallenge(t *testing.T) {
	cl := sharedCluster(t)
	c := connect(t, adminConfig(t, cl))
	ctx := testContext(t, 30*time.Second)
	id := c.identity()
	if !id.canReclaim(time.Now()) {
		t.Fatal("a fresh client cannot reclaim its global id")
	}
	// the loser: a second handshake with the same identity
	addr, err := denc.ParseEntityAddr(cl.MonAddrs[0])
	if err != nil {
		t.Fatal(err)
	}
	other, err := msgr.DialAddr(ctx, addr, c.msgrConfig(id.prov))
	if err != nil {
		t.Fatal(err)
	}
	if other.GlobalID() != c.GlobalID() {
		t.Errorf("second handshake got global id %d, want %d reclaimed", other.GlobalID(), c.GlobalID())
	}
	other.Close()

	before := ticketOf(c, denc.EntityTypeAuth)
	time.Sleep(1100 * time.Millisecond) // so a renewed ticket expires later
	id.cephx.MarkForRenewal(denc.EntityTypeAuth)
	if err := c.RenewTickets(ctx); err != nil {
		t.Fatalf("AUTH ticket renewal: %v", err)
	}
	if after := ticketOf(c, denc.EntityTypeAuth); !after.Expires.After(before.Expires) {
		t.Errorf("AUTH ticket not renewed: expires %v, before %v", after.Expires, before.Expires)
	}
	if si := c.Session(); si.Sessions != 1 || !si.Connected {
		t.Errorf("the renewal cost the session: %+v", si)
	}
}
