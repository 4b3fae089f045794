package cephconf

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/purerbd/purerbd/internal/alloctest"
)

func TestParseArgs(t *testing.T) {
	a, rest, err := ParseArgs([]string{"-c", "/x.conf", "--id=foo", "status", "--mon_host", "1.2.3.4", "--format", "json", "--ms-mode", "secure"})
	if err != nil {
		t.Fatal(err)
	}
	want := Args{Conf: "/x.conf", ID: "foo", MonHost: "1.2.3.4", MsMode: "secure"}
	if a != want {
		t.Errorf("args %+v, want %+v", a, want)
	}
	if !reflect.DeepEqual(rest, []string{"status", "--format", "json"}) {
		t.Errorf("rest %v", rest)
	}
	if _, _, err := ParseArgs([]string{"--keyring"}); !errors.Is(err, ErrUsage) {
		t.Errorf("missing value: %v", err)
	}
}

func TestResolvePrecedence(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "ceph.conf")
	os.WriteFile(conf, []byte("[global]\nmon host = 127.0.0.1\nkeyring = /k/$cluster.$name.keyring\n[client.bob]\nms mon client mode = crc\n"), 0o600)
	env := map[string]string{"CEPH_CONF": conf, "CEPH_ARGS": "--id bob -m 127.0.0.9"}
	s, err := Resolve(Args{MonHost: "127.0.0.5"}, func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if s.Name != "client.bob" || s.MonHost != "127.0.0.5" || s.ConfPath != conf || s.MonMode != "crc" || s.Mode != "crc secure" {
		t.Errorf("settings %v", s)
	}
	if !reflect.DeepEqual(s.KeyringPaths, []string{"/k/ceph.client.bob.keyring"}) {
		t.Errorf("keyring paths %v", s.KeyringPaths)
	}
	s, err = Resolve(Args{Conf: conf, MsMode: "prefer-secure", Key: "AQSECRET"}, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	if s.MonMode != "secure crc" || s.Mode != "secure crc" || s.Name != "client.admin" {
		t.Errorf("settings %v", s)
	}
	if strings.Contains(s.String(), "AQSECRET") {
		t.Errorf("String() leaks the key: %s", s)
	}
	if _, err := Resolve(Args{NoConfig: true}, func(string) string { return "" }); !errors.Is(err, ErrUsage) {
		t.Errorf("no mons: %v", err)
	}
	if _, err := Resolve(Args{NoConfig: true, MonHost: "x", Name: "admin"}, func(string) string { return "" }); !errors.Is(err, ErrUsage) {
		t.Errorf("bad name: %v", err)
	}
}

func TestParseMonHostIPv6(t *testing.T) {
	got, err := ParseMonHost(context.Background(), "[v2:[::1]:3300,v1:[::1]:6789] [::1]:6789 ::1", nil)
	if err != nil || len(got) != 1 || got[0].Addr.String() != "[::1]:3300" {
		t.Fatalf("IPv6 mon_host: %v %v", got, err)
	}
}

func TestParseMonHostErrors(t *testing.T) {
	for _, bad := range []string{"", "[v2:1.2.3.4:3300", "1.2.3.4:99999", "[v2:1.2.3.4:3300,5.6.7.8]", "host.invalid"} {
		if _, err := ParseMonHost(context.Background(), bad, nil); err == nil {
			t.Errorf("ParseMonHost(%q) accepted", bad)
		}
	}
}

func TestParseMonHostNames(t *testing.T) {
	got, err := ParseMonHost(context.Background(), "localhost:6789", netResolver{})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range got {
		if a.Addr.Port() != MonPortMsgr2 || !a.FromLegacy || !a.Addr.Addr().IsLoopback() {
			t.Errorf("localhost:6789 -> %v", a)
		}
	}
}

func FuzzParseMonHost(f *testing.F) {
	for _, s := range []string{"127.0.0.1", "[v2:127.0.0.1:3300,v1:127.0.0.1:6789],[v2:[::1]:3300]", "1.2.3.4:6789;5.6.7.8", "v1:[::1]:6789"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		alloctest.Check(t, len(s), func() { _, _ = ParseMonHost(context.Background(), s, nil) })
	})
}

// confScanBuffer is the line buffer Parse starts with, whatever it reads.
const confScanBuffer = 64 << 10

func FuzzParseConf(f *testing.F) {
	f.Add("[global]\nmon host = 1.2.3.4\n\\\n[client]\nkey = \"x;y\" # c\n")
	f.Fuzz(func(t *testing.T, s string) {
		var c *Conf
		var err error
		alloctest.CheckAllowing(t, len(s), confScanBuffer, func() { c, err = Parse(strings.NewReader(s), "fuzz") })
		if err == nil {
			c.Get("client.admin", "mon_host")
		}
	})
}

// TestArgOptions: each spelling of each client option sets its own field
// of Args, through ParseArgs as through ArgOption.Set.
func TestArgOptions(t *testing.T) {
	seen := map[Args]string{}
	for _, o := range ArgOptions() {
		var want Args
		o.Set(&want, "v")
		if want == (Args{}) {
			t.Errorf("%v sets nothing", o.Names)
		}
		if other, dup := seen[want]; dup {
			t.Errorf("%v and %s set the same field", o.Names, other)
		}
		seen[want] = o.Names[0]
		for _, n := range o.Names {
			argv := []string{n}
			if o.Value != "" {
				argv = append(argv, "v")
			}
			a, rest, err := ParseArgs(argv)
			if err != nil || a != want || len(rest) != 0 {
				t.Errorf("ParseArgs(%q) = %+v, %q, %v; want %+v", argv, a, rest, err, want)
			}
		}
	}
}
