package main

import (
	"bytes"
	"context"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/purerbd/purerbd/internal/cli"
	"github.com/purerbd/purerbd/rados/cephconf"
)

// TestGlobalOptions: Ceph's client options and purerbd's global ones,
// as rbd and rados take them, parsed once for every verb.
func TestGlobalOptions(t *testing.T) {
	for _, c := range []struct {
		args    string
		conn    cephconf.Args
		timeout time.Duration
	}{
		{"rbd ls -c /x.conf", cephconf.Args{Conf: "/x.conf"}, 0},
		{"--conf=/x.conf rbd ls", cephconf.Args{Conf: "/x.conf"}, 0},
		{"rbd --id bob ls", cephconf.Args{ID: "bob"}, 0},
		{"rbd ls -i bob", cephconf.Args{ID: "bob"}, 0},
		{"rbd ls --user=bob", cephconf.Args{ID: "bob"}, 0},
		{"status -n client.bob", cephconf.Args{Name: "client.bob"}, 0},
		{"status --name client.bob", cephconf.Args{Name: "client.bob"}, 0},
		{"status -k /k -m 10.0.0.1", cephconf.Args{Keyring: "/k", MonHost: "10.0.0.1"}, 0},
		{"status --keyring=/k --mon-host 10.0.0.1", cephconf.Args{Keyring: "/k", MonHost: "10.0.0.1"}, 0},
		{"status --mon_host 10.0.0.1 --ms_mode secure", cephconf.Args{MonHost: "10.0.0.1", MsMode: "secure"}, 0},
		{"rados -p p ls --mon_host=10.0.0.1 --mon-host 10.0.0.2", cephconf.Args{MonHost: "10.0.0.2"}, 0},
		{"--keyfile /kf --key KEY --cluster c --no-config-file version", cephconf.Args{KeyFile: "/kf", Key: "KEY", Cluster: "c", NoConfig: true}, 0},
		{"--connect-timeout 2.5 rbd ls", cephconf.Args{}, 2500 * time.Millisecond},
		{"rbd ls --connect_timeout=7", cephconf.Args{}, 7 * time.Second},
		{"nbd serve --socket s --memory 1M --connect-timeout 1", cephconf.Args{}, time.Second},
		// mon command's -i is its input file, as in the ceph tool
		{"mon command -i in.json --id bob {}", cephconf.Args{ID: "bob"}, 0},
		// crush test's -i is the map, as in crushtool
		{"crush test -i map --id bob", cephconf.Args{ID: "bob"}, 0},
	} {
		g := newGlobals()
		if _, err := cli.Parse(newRootWith(g), strings.Fields(c.args)); err != nil {
			t.Errorf("%q: %v", c.args, err)
			continue
		}
		want := c.timeout
		if want == 0 {
			want = defaultConnectTimeout
		}
		if g.conn != c.conn || g.connectTimeout != want {
			t.Errorf("%q: %+v, timeout %v; want %+v, %v", c.args, g.conn, g.connectTimeout, c.conn, want)
		}
	}
	for _, bad := range []string{"--connect-timeout 0 status", "--connect-timeout x status", "status --log-level loud",
		"status -m", "-v=maybe status"} {
		if _, err := cli.Parse(newRoot(), strings.Fields(bad)); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	g := newGlobals()
	if _, err := cli.Parse(newRootWith(g), []string{"rbd", "ls", "-v"}); err != nil || g.logLevel == nil || *g.logLevel != slog.LevelInfo {
		t.Errorf("-v: %v, level %v", err, g.logLevel)
	}
	if _, err := cli.Parse(newRootWith(g), []string{"--log-level", "debug", "rbd", "ls"}); err != nil || *g.logLevel != slog.LevelDebug {
		t.Errorf("--log-level debug: %v, level %v", err, g.logLevel)
	}
}

// TestCEPHARGS: CEPH_ARGS completes the command line, which wins, as for
// Ceph's tools.
func TestCEPHARGS(t *testing.T) {
	g := newGlobals()
	if _, err := cli.Parse(newRootWith(g), []string{"rbd", "ls", "--id", "bob", "--no-config-file"}); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"CEPH_ARGS": "--id alice --mon_host 10.0.0.9 -k /etc/k"}
	s, err := cephconf.Resolve(g.conn, func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if s.Name != "client.bob" || s.MonHost != "10.0.0.9" || len(s.KeyringPaths) != 1 || s.KeyringPaths[0] != "/etc/k" {
		t.Errorf("settings %s", s)
	}
}

// testKey is a well-formed cephx key that no cluster knows.
const testKey = "AQAAAAAAAAAAABAAAAECAwQFBgcICQoLDA0ODw=="

// TestConnectTimeoutEveryVerb: --connect-timeout bounds connecting for
// every verb that connects (rbd's and rados' ignored it), against a
// monitor address where nothing listens.
func TestConnectTimeoutEveryVerb(t *testing.T) {
	unreachable := []string{"--no-config-file", "-m", "127.0.0.1:1", "--key", testKey, "--log-level", "error"}
	for _, c := range []struct {
		args    []string
		timeout time.Duration
	}{
		{[]string{"rbd", "ls"}, 500 * time.Millisecond},
		{[]string{"rbd", "ls"}, 2 * time.Second},
		{[]string{"rbd", "info", "img"}, 500 * time.Millisecond},
		{[]string{"rados", "-p", "rbd", "ls"}, 500 * time.Millisecond},
		{[]string{"nbd", "serve", "--socket", t.TempDir() + "/s", "--image", "rbd/img"}, 500 * time.Millisecond},
		{[]string{"status"}, 500 * time.Millisecond},
		{[]string{"mon", "command", `{"prefix":"status"}`}, 500 * time.Millisecond},
	} {
		args := slices.Concat(c.args, unreachable, []string{"--connect-timeout", strconv.FormatFloat(c.timeout.Seconds(), 'g', -1, 64)})
		t.Run(strings.Join(c.args[:min(2, len(c.args))], " ")+" "+c.timeout.String(), func(t *testing.T) {
			t.Parallel()
			var stdout, stderr bytes.Buffer
			t0 := time.Now()
			code := run(context.Background(), args, &stdout, &stderr)
			took := time.Since(t0)
			// the margin is for a busy machine; without the option a
			// verb would take the default 30 s
			if code != 1 || took < c.timeout || took > c.timeout+4*time.Second || !strings.Contains(stderr.String(), "127.0.0.1:1") {
				t.Errorf("purerbd %s: exit %d after %v (timeout %v); stderr:\n%s", strings.Join(args, " "), code, took, c.timeout, stderr.String())
			}
		})
	}
}

// TestLoggingEveryVerb: --log-level sets what the connection logs, for
// the rbd and rados verbs too.
func TestLoggingEveryVerb(t *testing.T) {
	base := []string{"--no-config-file", "-m", "127.0.0.1:1", "--key", testKey, "--connect-timeout", "0.5"}
	for _, verb := range [][]string{{"rbd", "ls"}, {"rados", "-p", "rbd", "ls"}, {"status"}} {
		t.Run(verb[0], func(t *testing.T) {
			t.Parallel()
			var stderr bytes.Buffer
			run(context.Background(), slices.Concat(verb, base, []string{"--log-level", "debug"}), &bytes.Buffer{}, &stderr)
			if !strings.Contains(stderr.String(), "level=DEBUG") {
				t.Errorf("%s --log-level debug logged no debug line:\n%s", verb, stderr.String())
			}
			stderr.Reset()
			run(context.Background(), slices.Concat(verb, base, []string{"--log-level", "error"}), &bytes.Buffer{}, &stderr)
			if strings.Contains(stderr.String(), "level=") || strings.Contains(stderr.String(), "WARN") {
				t.Errorf("%s --log-level error logged below errors:\n%s", verb, stderr.String())
			}
		})
	}
}
