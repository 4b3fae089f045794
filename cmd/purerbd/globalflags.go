package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/purerbd/purerbd/rados/cephconf"
	"github.com/purerbd/purerbd/rados/monc"
)

// globalUsage describes the client options every verb that talks to a
// cluster accepts, as Ceph's own tools spell them.
const globalUsage = `client options (as Ceph's tools; CEPH_ARGS and CEPH_CONF are read too):
  -c, --conf FILE          ceph.conf to read (default: Ceph's usual locations)
  --id ID | -n, --name TYPE.ID
                           identity (default client.admin)
  -k, --keyring FILE       keyring holding its key (or --keyfile FILE, --key KEY)
  -m, --mon-host MONS      monitors, in any mon_host form
  --ms-mode MODE           crc, secure, prefer-crc or prefer-secure
  --connect-timeout SECS   give up connecting after SECS seconds (default 30)`

// defaultConnectTimeout bounds connecting to the monitors.
const defaultConnectTimeout = 30 * time.Second

// globalFlags are the client options shared by the verbs that talk to a
// cluster.
type globalFlags struct {
	conn           cephconf.Args
	connectTimeout time.Duration
}

// parseGlobalFlags takes the client options out of args, wherever they
// appear, and returns the other arguments in order.
func parseGlobalFlags(args []string) (globalFlags, []string, error) {
	conn, rest, err := cephconf.ParseArgs(args)
	if err != nil {
		return globalFlags{}, nil, err
	}
	g := globalFlags{conn: conn, connectTimeout: defaultConnectTimeout}
	var out []string
	for i := 0; i < len(rest); i++ {
		a := rest[i]
		if a == "--" {
			out = append(out, rest[i:]...)
			break
		}
		name, val, hasVal := a, "", false
		if strings.HasPrefix(a, "--") {
			if eq := strings.IndexByte(a, '='); eq >= 0 {
				name, val, hasVal = a[:eq], a[eq+1:], true
			}
			name = "--" + strings.ReplaceAll(name[2:], "_", "-")
		}
		if name != "--connect-timeout" {
			out = append(out, a)
			continue
		}
		if !hasVal {
			if i+1 >= len(rest) {
				return g, nil, fmt.Errorf("%s needs a value", name)
			}
			i++
			val = rest[i]
		}
		secs, err := strconv.ParseFloat(val, 64)
		if err != nil || secs <= 0 {
			return g, nil, fmt.Errorf("--connect-timeout %q: want a positive number of seconds", val)
		}
		g.connectTimeout = time.Duration(secs * float64(time.Second))
	}
	return g, out, nil
}

// connectMon resolves the settings (flags, CEPH_ARGS, CEPH_CONF,
// ceph.conf) and returns a connected monitor client. Only errors of the
// client are logged, to stderr.
func (g globalFlags) connectMon(ctx context.Context, stderr io.Writer) (*monc.Client, error) {
	s, err := cephconf.Resolve(g.conn, nil)
	if err != nil {
		return nil, err
	}
	cfg, err := monc.ConfigFromSettings(ctx, s, nil)
	if err != nil {
		return nil, err
	}
	cfg.ConnectTimeout = g.connectTimeout
	cfg.Logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	return monc.New(ctx, cfg)
}
