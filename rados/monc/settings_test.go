package monc

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/purerbd/purerbd/rados/auth"
	"github.com/purerbd/purerbd/rados/cephconf"
	"github.com/purerbd/purerbd/rados/msgr"
)

// TestConfigFromSettings resolves the test cluster's ceph.conf as the
// ceph CLI would and connects with the result.
func TestConfigFromSettings(t *testing.T) {
	cl := sharedCluster(t)
	s, err := cephconf.Resolve(cephconf.Args{Conf: cl.Conf}, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := ConfigFromSettings(context.Background(), s, nil)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Name.String() != "client.admin" || cfg.Mode != msgr.ModePreferSecure || cfg.AuthNone || cfg.Key.IsZero() {
		t.Errorf("config %+v", cfg)
	}
	if strings.Join(cfg.MonAddrs, ",") != strings.Join(cl.MonAddrs, ",") {
		t.Errorf("monitors %v, want %v", cfg.MonAddrs, cl.MonAddrs)
	}
	cfg.Logger = testLogger(t)
	c := connect(t, cfg)
	if c.FSID().String() != cl.FSID {
		t.Errorf("fsid %s", c.FSID())
	}
}

func TestFindKey(t *testing.T) {
	dir := t.TempDir()
	const key = "AQBy2Z9mAAAAABAAlfzG+0ytNdeurjXjoWnZoQ=="
	other := filepath.Join(dir, "other.keyring")
	os.WriteFile(other, []byte("[client.other]\n\tkey = "+key+"\n"), 0o600)
	good := filepath.Join(dir, "good.keyring")
	os.WriteFile(good, []byte("[client.admin]\n\tkey = "+key+"\n"), 0o600)
	bad := filepath.Join(dir, "bad.keyring")
	os.WriteFile(bad, []byte("[client.admin]\n\tkey = not base64!\n"), 0o600)
	keyfile := filepath.Join(dir, "keyfile")
	os.WriteFile(keyfile, []byte(key+"\n"), 0o600)
	want, _ := auth.ParseKey(key)

	for _, tc := range []struct {
		name string
		s    cephconf.Settings
		err  string
	}{
		{"keyring search", cephconf.Settings{Name: "client.admin", KeyringPaths: []string{filepath.Join(dir, "missing"), other, good}}, ""},
		{"key", cephconf.Settings{Name: "client.admin", Key: key, KeyringPaths: []string{bad}}, ""},
		{"keyfile", cephconf.Settings{Name: "client.admin", KeyFile: keyfile}, ""},
		{"no entry", cephconf.Settings{Name: "client.admin", KeyringPaths: []string{other, filepath.Join(dir, "missing")}}, "no key for client.admin"},
		{"bad keyring", cephconf.Settings{Name: "client.admin", KeyringPaths: []string{bad}}, "bad.keyring"},
		{"bad key", cephconf.Settings{Name: "client.admin", Key: "AQB"}, "--key"},
	} {
		t.Run(strings.ReplaceAll(tc.name, " ", "_"), func(t *testing.T) {
			k, err := findKey(&tc.s)
			if tc.err == "" {
				if err != nil || string(k.Secret()) != string(want.Secret()) {
					t.Errorf("key %v, %v", k, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("error %v, want one saying %q", err, tc.err)
			}
			if err != nil && strings.Contains(err.Error(), key) {
				t.Error("the error reveals the key")
			}
		})
	}
}

func TestSettingsAuthNone(t *testing.T) {
	conf, err := cephconf.Parse(strings.NewReader("[global]\nmon host = 127.0.0.1:1\nauth client required = none\n"), "test.conf")
	if err != nil {
		t.Fatal(err)
	}
	s := &cephconf.Settings{Name: "client.x", MonHost: "127.0.0.1:1", MonMode: "crc", Conf: conf}
	cfg, err := ConfigFromSettings(context.Background(), s, nil)
	if err != nil || !cfg.AuthNone || cfg.Mode != msgr.ModeCRC || cfg.MonAddrs[0] != "127.0.0.1:1" {
		t.Errorf("config %+v, %v", cfg, err)
	}
	for v, want := range map[string]bool{"none": true, "cephx": false, "cephx, none": false, "none none": true, "": false} {
		if authNoneOnly(v) != want {
			t.Errorf("authNoneOnly(%q) = %v", v, !want)
		}
	}
	// the monitor addresses of a Config are checked by New
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if _, err := New(ctx, Config{MonAddrs: []string{"v1:1.2.3.4:6789"}, AuthNone: true}); err == nil || !strings.Contains(err.Error(), "not a msgr2 address") {
		t.Errorf("v1 address: %v", err)
	}
	if _, err := New(ctx, Config{MonAddrs: []string{"1.2.3.4"}}); err == nil || !strings.Contains(err.Error(), "no key") {
		t.Errorf("no key: %v", err)
	}
	if _, err := New(ctx, Config{}); err == nil {
		t.Error("no monitors accepted")
	}
}
