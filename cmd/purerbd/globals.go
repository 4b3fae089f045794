package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/purerbd/purerbd/internal/cli"
	"github.com/purerbd/purerbd/rados"
	"github.com/purerbd/purerbd/rados/cephconf"
	"github.com/purerbd/purerbd/rados/monc"
)

// defaultConnectTimeout bounds connecting to the cluster.
const defaultConnectTimeout = 30 * time.Second

// globals are the options of every verb, declared on the root: Ceph's
// client options (which CEPH_ARGS and CEPH_CONF complete, as for Ceph's
// tools), the connection timeout, logging and profiling.
type globals struct {
	conn           cephconf.Args
	connectTimeout time.Duration
	// logLevel is the --log-level given; nil leaves each verb its own
	// default.
	logLevel   *slog.Level
	cpuProfile string
	stderr     io.Writer
}

func newGlobals() *globals {
	return &globals{connectTimeout: defaultConnectTimeout, stderr: io.Discard}
}

// register declares the global options on root, and its hook that
// starts the CPU profile and takes the verb's standard error for logs.
func (g *globals) register(root *cli.Command) {
	for _, o := range cephconf.ArgOptions() {
		spec := strings.Join(o.Names, ", ")
		if o.Value != "" {
			spec += " " + o.Value
		}
		root.Func(spec, o.Help, func(v []string) error {
			if o.Value == "" {
				on, err := strconv.ParseBool(v[0])
				if err != nil || !on {
					return err
				}
			}
			o.Set(&g.conn, v[0])
			return nil
		})
	}
	root.Func("--connect-timeout SECS", fmt.Sprintf("give up connecting to the cluster after SECS seconds (default %v)",
		defaultConnectTimeout.Seconds()), func(v []string) error {
		secs, err := strconv.ParseFloat(v[0], 64)
		if err != nil || secs <= 0 {
			return fmt.Errorf("want a positive number of seconds")
		}
		g.connectTimeout = time.Duration(secs * float64(time.Second))
		return nil
	})
	root.Func("--log-level LEVEL", "log to stderr from LEVEL up: debug, info, warn or error (default: each verb's)",
		func(v []string) error {
			var l slog.Level
			if err := l.UnmarshalText([]byte(v[0])); err != nil {
				return fmt.Errorf("want debug, info, warn or error")
			}
			g.logLevel = &l
			return nil
		})
	root.Func("-v, --verbose", "log from level info up (--log-level info)", func(v []string) error {
		on, err := strconv.ParseBool(v[0])
		if on {
			l := slog.LevelInfo
			g.logLevel = &l
		}
		return err
	})
	root.String(&g.cpuProfile, "--cpuprofile FILE",
		"write a CPU profile of the command to FILE, for go tool pprof (or $"+cpuProfileEnv+")")
	root.Before = func(_ context.Context, inv *cli.Invocation) (func(), error) {
		g.stderr = inv.Stderr
		path := g.cpuProfile
		if path == "" {
			path = os.Getenv(cpuProfileEnv)
		}
		return startCPUProfile(path, inv.Stderr), nil
	}
}

// logger logs to the verb's standard error from the --log-level given,
// else from def.
func (g *globals) logger(def slog.Level) *slog.Logger {
	if g.logLevel != nil {
		def = *g.logLevel
	}
	return slog.New(slog.NewTextHandler(g.stderr, &slog.HandlerOptions{Level: def}))
}

// connectMon returns a connected monitor client; it logs errors only,
// unless --log-level says otherwise.
func (g *globals) connectMon(ctx context.Context) (*monc.Client, error) {
	s, err := cephconf.Resolve(g.conn, nil)
	if err != nil {
		return nil, err
	}
	cfg, err := monc.ConfigFromSettings(ctx, s, nil)
	if err != nil {
		return nil, err
	}
	cfg.ConnectTimeout = g.connectTimeout
	cfg.Logger = g.logger(slog.LevelError)
	return monc.New(ctx, cfg)
}

// connectRados connects to the cluster the client options name
// (completed by CEPH_ARGS, CEPH_CONF and ceph.conf). Without
// --log-level the connection logs as rados does by default.
func (g *globals) connectRados(ctx context.Context) (*rados.Conn, error) {
	cfg := rados.Config{ConnectTimeout: g.connectTimeout}
	if g.logLevel != nil {
		cfg.Logger = g.logger(slog.LevelWarn)
	}
	return rados.ConnectFromConfWith(ctx, g.conn, cfg)
}
