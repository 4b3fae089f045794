package msgr

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/purerbd/purerbd/rados/auth"
	"github.com/purerbd/purerbd/rados/denc"
)

// ConnMode is a negotiated connection mode (CEPH_CON_MODE_*).
type ConnMode uint32

// Connection modes.
const (
	ConnModeUnknown ConnMode = 0
	ConnModeCRC     ConnMode = 1 // integrity by crc32c only
	ConnModeSecure  ConnMode = 2 // AES-128-GCM
)

// String returns Ceph's name for m.
func (m ConnMode) String() string {
	switch m {
	case ConnModeCRC:
		return "crc"
	case ConnModeSecure:
		return "secure"
	}
	return fmt.Sprintf("mode(%d)", uint32(m))
}

// Mode is the client's preference among connection modes; the server
// picks from the list it is offered.
type Mode int

// Mode preferences.
const (
	// ModeDefault follows Ceph's client defaults: "secure crc" to
	// monitors (ms_mon_client_mode), "crc secure" to other daemons
	// (ms_client_mode).
	ModeDefault      Mode = iota
	ModeCRC               // crc only
	ModeSecure            // secure only
	ModePreferCRC         // crc, else secure
	ModePreferSecure      // secure, else crc
)

// ParseMode accepts "crc", "secure", "prefer-crc", "prefer-secure", ""
// (default), and Ceph's own spellings "crc secure" and "secure crc".
func ParseMode(s string) (Mode, error) {
	switch strings.Join(strings.Fields(strings.ToLower(s)), " ") {
	case "", "default":
		return ModeDefault, nil
	case "crc":
		return ModeCRC, nil
	case "secure":
		return ModeSecure, nil
	case "prefer-crc", "crc secure":
		return ModePreferCRC, nil
	case "prefer-secure", "secure crc":
		return ModePreferSecure, nil
	}
	return 0, fmt.Errorf("msgr: unknown connection mode %q (want crc, secure, prefer-crc or prefer-secure)", s)
}

// modes returns the preference list sent in AUTH_REQUEST.
func (m Mode) modes(peer denc.EntityType) []ConnMode {
	switch m {
	case ModeCRC:
		return []ConnMode{ConnModeCRC}
	case ModeSecure:
		return []ConnMode{ConnModeSecure}
	case ModePreferCRC:
		return []ConnMode{ConnModeCRC, ConnModeSecure}
	case ModePreferSecure:
		return []ConnMode{ConnModeSecure, ConnModeCRC}
	}
	if peer == denc.EntityTypeMon {
		return []ConnMode{ConnModeSecure, ConnModeCRC}
	}
	return []ConnMode{ConnModeCRC, ConnModeSecure}
}

// DefaultFeatures is the Ceph feature set this client advertises unless
// Config.Features says otherwise: the set librados of Ceph 16.2.15 sends
// (CEPH_FEATURES_ALL of Pacific, as "ceph features" reports for a 16.2.15 client). Peers
// pick message encodings from the features both sides have, so decoders
// above this package must understand the encodings these imply.
const DefaultFeatures uint64 = 0x3f01cfbdfffdffff

// msgr2 protocol features, exchanged in the banner.
const (
	msgr2FeatureRevision1   uint64 = 1 << 0
	msgr2FeatureCompression uint64 = 1 << 1
	msgr2Supported                 = msgr2FeatureRevision1
	msgr2Required                  = msgr2FeatureRevision1
)

// CEPH_MSG_CONNECT_LOSSY, in the flags of CLIENT_IDENT and SERVER_IDENT.
const connectLossy uint64 = 1

// Config describes a connection to dial. Only Auth and PeerType are
// required.
type Config struct {
	// Auth provides the authentication handler (auth.CephX, auth.None).
	Auth auth.Provider
	// PeerType is the kind of daemon dialed: denc.EntityTypeMon,
	// EntityTypeOSD or EntityTypeMgr. The peer's HELLO must agree.
	PeerType denc.EntityType
	// Mode is the connection mode preference.
	Mode Mode
	// Features are the Ceph features advertised (0: DefaultFeatures);
	// RequiredFeatures must all be offered by the peer.
	Features         uint64
	RequiredFeatures uint64
	// Nonce identifies this client instance in its address; every
	// connection of one client should use the same (0: random per Conn).
	// Ceph blocklists clients by address and nonce.
	Nonce uint32
	// GlobalSeq numbers this client's connection attempts (0: 1).
	GlobalSeq uint64
	// KeepaliveInterval is how often KEEPALIVE2 is sent (0: 10 s,
	// negative: never). LivenessTimeout fails the connection when
	// nothing has been received for that long (0: 30 s, negative:
	// never).
	KeepaliveInterval time.Duration
	LivenessTimeout   time.Duration
	// WriteTimeout bounds one socket write (0: 30 s).
	WriteTimeout time.Duration
	// IncomingQueue is the capacity of Conn.Incoming (0: 64).
	IncomingQueue int
	// Intercept, when not nil, is offered every message received, on the
	// connection's reader goroutine, before it is queued on Incoming; a
	// message it takes (returns true) is not queued. It saves the owner a
	// hand-off between goroutines per message. It must not block nor
	// wait for this connection (Close waits for the reader): nothing
	// more is read while it runs.
	Intercept func(*Message) bool
	// MaxDataSize bounds a received data segment (0: 128 MiB); front
	// and middle segments are bounded at 16 MiB.
	MaxDataSize uint32
	// DialContext opens the TCP connection (nil: a net.Dialer). The
	// address it gets is the peer's IP:port; the peer's entity address
	// used in the handshake does not change.
	DialContext func(ctx context.Context, network, address string) (net.Conn, error)
	// Logger receives debug events (nil: slog.Default()). Keys and
	// secrets are never logged.
	Logger *slog.Logger
	// Counters, when not nil, counts the messages the connection writes
	// and the writes that carry them (shared by the connections of one
	// client).
	Counters *Counters
}

// withDefaults fills zero fields.
func (c Config) withDefaults() Config {
	if c.Features == 0 {
		c.Features = DefaultFeatures
	}
	if c.GlobalSeq == 0 {
		c.GlobalSeq = 1
	}
	if c.KeepaliveInterval == 0 {
		c.KeepaliveInterval = 10 * time.Second
	}
	if c.LivenessTimeout == 0 {
		c.LivenessTimeout = 30 * time.Second
	}
	if c.WriteTimeout == 0 {
		c.WriteTimeout = 30 * time.Second
	}
	if c.IncomingQueue == 0 {
		c.IncomingQueue = 64
	}
	if c.MaxDataSize == 0 {
		c.MaxDataSize = defaultLimits.data
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

func (c *Config) limits() limits {
	l := defaultLimits
	l.data = c.MaxDataSize
	return l
}
