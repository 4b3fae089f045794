package monc

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"time"

	"github.com/purerbd/purerbd/rados/auth"
	"github.com/purerbd/purerbd/rados/denc"
	"github.com/purerbd/purerbd/rados/msgr"
)

// Config describes a monitor client. MonAddrs and, for cephx, Key are
// required; zero values elsewhere take the defaults documented per field.
type Config struct {
	// MonAddrs are the monitors to contact first, in any form
	// denc.ParseEntityAddr accepts ("127.0.0.1:3300",
	// "v2:10.0.0.1:3300/0"; no port means 3300). Once connected, the
	// MonMap's monitors are used for hunting.
	MonAddrs []string
	// Name is the identity to authenticate as (zero: client.admin).
	Name denc.AuthName
	// Key is the cephx secret of Name. It is never logged.
	Key auth.CryptoKey
	// AuthNone selects auth none instead of cephx (clusters with
	// auth_client_required = none).
	AuthNone bool
	// Services are the service tickets to obtain and keep renewed (0:
	// auth.DefaultServices: mon, osd and mgr).
	Services denc.EntityType
	// Mode is the connection mode preference towards monitors.
	Mode msgr.Mode
	// ConnectTimeout bounds New when its context has no earlier
	// deadline (0: 30 s).
	ConnectTimeout time.Duration
	// HuntAttemptTimeout bounds one monitor handshake while hunting, so
	// a monitor that accepts but never answers is given up (0: 3 s).
	HuntAttemptTimeout time.Duration
	// HuntParallel is how many monitors are dialed at once (0: 3).
	HuntParallel int
	// HuntBackoffMax is the longest pause between two hunting rounds
	// that all failed; pauses start at 250 ms and double (0: 10 s).
	HuntBackoffMax time.Duration
	// KeepaliveInterval and LivenessTimeout detect a monitor that went
	// silent (0: 10 s and 30 s, as Ceph's mon_client_ping_interval and
	// mon_client_ping_timeout).
	KeepaliveInterval time.Duration
	LivenessTimeout   time.Duration
	// RenewRetry is how long an unanswered ticket renewal waits before
	// it is sent again (0: 10 s).
	RenewRetry time.Duration
	// SubscribeConfig also subscribes to the monitors' central
	// configuration for this client (see Client.CentralConfig).
	SubscribeConfig bool
	// Nonce is this client instance's address nonce (0: random). A
	// librados client has one address for its monitor and OSD sessions;
	// rados.Conn gives both the same nonce, so that the address the
	// monitors see is the one OSDs record for its locks and watches.
	Nonce uint32
	// Hostname is sent with subscriptions (empty: os.Hostname).
	Hostname string
	// DialContext opens the TCP connections to monitors (nil: a
	// net.Dialer), e.g. from another network namespace (package
	// rados/netnsdial).
	DialContext func(ctx context.Context, network, address string) (net.Conn, error)
	// Logger receives connection events (nil: slog.Default()). Keys are
	// never logged.
	Logger *slog.Logger
}

// withDefaults validates c and fills zero fields.
func (c Config) withDefaults() (Config, error) {
	if len(c.MonAddrs) == 0 {
		return c, fmt.Errorf("monc: no monitor addresses")
	}
	if c.Name == (denc.AuthName{}) {
		c.Name = denc.AuthName{Type: denc.EntityTypeClient, ID: "admin"}
	}
	if !c.AuthNone && c.Key.IsZero() {
		return c, fmt.Errorf("monc: no key for %s (cephx needs one; set AuthNone for auth none)", c.Name)
	}
	if c.Services == 0 {
		c.Services = auth.DefaultServices
	}
	if c.ConnectTimeout <= 0 {
		c.ConnectTimeout = 30 * time.Second
	}
	if c.HuntAttemptTimeout <= 0 {
		c.HuntAttemptTimeout = 3 * time.Second
	}
	if c.HuntParallel <= 0 {
		c.HuntParallel = 3
	}
	if c.HuntBackoffMax <= 0 {
		c.HuntBackoffMax = 10 * time.Second
	}
	if c.KeepaliveInterval == 0 {
		c.KeepaliveInterval = 10 * time.Second
	}
	if c.LivenessTimeout == 0 {
		c.LivenessTimeout = 30 * time.Second
	}
	if c.RenewRetry <= 0 {
		c.RenewRetry = 10 * time.Second
	}
	if c.Hostname == "" {
		c.Hostname, _ = os.Hostname()
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c, nil
}

// parseMonAddrs parses MonAddrs into msgr2 addresses.
func parseMonAddrs(in []string) ([]denc.EntityAddr, error) {
	out := make([]denc.EntityAddr, 0, len(in))
	for _, s := range in {
		a, err := denc.ParseEntityAddr(s)
		if err != nil {
			return nil, fmt.Errorf("monc: monitor address %q: %w", s, err)
		}
		switch a.Type {
		case denc.AddrAny:
			a.Type = denc.AddrMsgr2
			if a.Port == 6789 { // the legacy port: Ceph's clients dial msgr2 instead
				a.Port = 3300
			}
		case denc.AddrMsgr2:
		default:
			return nil, fmt.Errorf("monc: monitor address %q is not a msgr2 address", s)
		}
		if a.Port == 0 {
			a.Port = 3300
		}
		out = append(out, a)
	}
	return out, nil
}
