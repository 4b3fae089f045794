package cephconf

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/purerbd/purerbd/internal/shorttier"
)

// monmaptoolAddrs asks Ceph itself (monmaptool --generate reads mon_host
// the way every Ceph client does) which addresses a mon_host value names,
// and returns the msgr2 address a v2-only client should dial for each mon.
func monmaptoolAddrs(t *testing.T, monHost string) []string {
	t.Helper()
	shorttier.Skip(t, "monmaptool")
	if _, err := exec.LookPath("monmaptool"); err != nil {
		t.Fatal("monmaptool missing: install ceph-common (make deps)")
	}
	dir := plainTempDir(t) // Ceph splits -c paths on commas
	conf := filepath.Join(dir, "ceph.conf")
	body := fmt.Sprintf("[global]\nfsid = 3456b731-5d2e-4c34-ab2f-9e84c5e1775f\nmon host = %s\n", monHost)
	if err := os.WriteFile(conf, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	mm := filepath.Join(dir, "monmap")
	if out, err := exec.Command("monmaptool", "--create", "--generate", "-c", conf, "--clobber", mm).CombinedOutput(); err != nil {
		t.Fatalf("monmaptool --generate: %v\n%s", err, out)
	}
	out, err := exec.Command("monmaptool", "--print", mm).CombinedOutput()
	if err != nil {
		t.Fatalf("monmaptool --print: %v\n%s", err, out)
	}
	line := regexp.MustCompile(`^\d+: (\S+) mon\.`)
	v2 := regexp.MustCompile(`v2:([^,/\]]+)/`)
	v1 := regexp.MustCompile(`v1:([^,/\]]+)/`)
	var addrs []string
	for _, l := range strings.Split(string(out), "\n") {
		m := line.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		if a := v2.FindStringSubmatch(m[1]); a != nil {
			addrs = append(addrs, a[1])
		} else if a := v1.FindStringSubmatch(m[1]); a != nil {
			host := a[1][:strings.LastIndexByte(a[1], ':')]
			addrs = append(addrs, fmt.Sprintf("%s:%d", host, MonPortMsgr2))
		}
	}
	sort.Strings(addrs)
	return addrs
}

func TestParseMonHostMatchesCeph(t *testing.T) {
	for _, mh := range []string{
		"127.0.0.1",
		"127.0.0.1:6789",
		"127.0.0.1:3300",
		"127.0.0.1:7000",
		"v1:127.0.0.1:6789",
		"v2:127.0.0.1:3301",
		"[v2:127.0.0.1:3300,v1:127.0.0.1:6789]",
		"[v2:127.0.0.1:3301,v1:127.0.0.1:6790],[v2:127.0.0.2:3300,v1:127.0.0.2:6789]",
		"127.0.0.1:6789, 127.0.0.2:6789,127.0.0.3:6789",
		"127.0.0.1 127.0.0.2 127.0.0.3",
		"[v1:127.0.0.9:6789]",
		"127.0.0.1:6789 , 127.0.0.2:3300",
	} {
		t.Run(mh, func(t *testing.T) {
			want := monmaptoolAddrs(t, mh)
			got, err := ParseMonHost(context.Background(), mh, nil)
			if err != nil {
				t.Fatal(err)
			}
			var gs []string
			for _, a := range got {
				gs = append(gs, a.Addr.String())
			}
			sort.Strings(gs)
			if strings.Join(gs, " ") != strings.Join(want, " ") {
				t.Errorf("ParseMonHost(%q) = %v, Ceph says %v", mh, gs, want)
			}
		})
	}
}

// TestLookupMatchesCephConf compares option lookup (sections, name
// normalisation, metavariables) with Ceph's own ceph-conf tool.
func TestLookupMatchesCephConf(t *testing.T) {
	shorttier.Skip(t, "ceph-conf")
	if _, err := exec.LookPath("ceph-conf"); err != nil {
		t.Fatal("ceph-conf missing: install ceph-common (make deps)")
	}
	dir := plainTempDir(t)
	conf := filepath.Join(dir, "ceph.conf")
	body := `# a comment
[global]
	mon host = 127.0.0.1:6789   ; trailing comment
	keyring = /etc/ceph/$cluster.$name.keyring
	ms_mon_client_mode = secure crc
	osd-pool-default-size = 2
	rbd_cache = false
[client]
	ms client mode = crc
	keyring = /tmp/client.keyring
[client.foo]
	keyring = /tmp/$name.$id.$type.keyring
	Mon_Host = "127.0.0.2"
`
	if err := os.WriteFile(conf, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Load(conf)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"client.admin", "client.foo", "osd.0"} {
		for _, key := range []string{"mon_host", "keyring", "ms_mon_client_mode", "ms_client_mode", "osd_pool_default_size", "rbd_cache", "Mon_Host"} {
			out, err := exec.Command("ceph-conf", "-c", conf, "-n", name, "--lookup", key).Output()
			want := strings.TrimSpace(string(out))
			if err != nil {
				want = "" // ceph-conf exits 1 for an unset option
			}
			v, _ := c.Get(name, key)
			if got := Expand(v, "ceph", name); got != want {
				t.Errorf("%s %s: got %q, ceph-conf says %q", name, key, got, want)
			}
		}
	}
}

func plainTempDir(t *testing.T) string {
	dir, err := os.MkdirTemp("", "cephconf")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}
