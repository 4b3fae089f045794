package main

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// TestParseServerArgs reads the command lines list-mapped finds in
// /proc: rbd-nbd's (Ceph's or purerbd reached as rbd-nbd) and purerbd's
// own nbd map, and nothing else.
func TestParseServerArgs(t *testing.T) {
	for _, c := range []struct {
		argv   []string
		dev    string
		ok     bool
		spec   string
		attach bool
	}{
		{[]string{"rbd-nbd", "map", "pool/img"}, "/dev/nbd0", true, "pool/img", false},
		{[]string{"/usr/bin/rbd-nbd", "--try-netlink", "--io-timeout", "30", "map", "img@s1"}, "/dev/nbd1", true, "rbd/img@s1", false},
		{[]string{"rbd-nbd", "--device", "/dev/nbd3", "attach", "--cookie", "c", "p/ns/img"}, "/dev/nbd3", true, "p/ns/img", true},
		{[]string{"rbd-nbd", "--device", "/dev/nbd3", "attach", "--cookie", "c", "p/ns/img"}, "/dev/nbd2", false, "", false},
		{[]string{"rbd-nbd", "attach", "--cookie", "c", "p/img"}, "/dev/nbd2", false, "", false},
		{[]string{"rbd-nbd", "--device", "/dev/nbd4", "map", "p/img"}, "/dev/nbd5", false, "", false},
		{[]string{"/bin/purerbd", "-c", "/etc/ceph/ceph.conf", "rbd-nbd", "map", "p/img", "--show-cookie"}, "/dev/nbd0", true, "p/img", false},
		{[]string{"purerbd", "nbd", "map", "p/img", "--snap", "monday"}, "/dev/nbd0", true, "p/img@monday", false},
		{[]string{"purerbd", "nbd", "map", "--memory", "64M"}, "/dev/nbd0", false, "", false},
		{[]string{"rbd-nbd", "list-mapped"}, "/dev/nbd0", false, "", false},
		{[]string{"rbd-nbd", "unmap", "p/img"}, "/dev/nbd0", false, "", false},
		{[]string{"vim", "rbd-nbd", "map", "p/img"}, "/dev/nbd0", false, "", false},
		{[]string{"rbd-nbd", "map", "p/img", "--no-such-option"}, "/dev/nbd0", false, "", false},
		{[]string{"rbd-nbd"}, "/dev/nbd0", false, "", false},
		{[]string{"rbd", "device", "map", "-t", "nbd", "-p", "pool2", "img"}, "/dev/nbd0", true, "pool2/img", false},
		{[]string{"rbd", "map", "-t", "nbd", "-o", "try-netlink,reattach-timeout=60", "--namespace", "ns", "-p", "p", "img"}, "/dev/nbd0", true, "p/ns/img", false},
		{[]string{"purerbd", "rbd", "device", "attach", "-t", "nbd", "--device", "/dev/nbd3", "--cookie", "c", "p/img"}, "/dev/nbd3", true, "p/img", true},
		{[]string{"rbd", "device", "map", "p/img"}, "/dev/nbd0", false, "", false},
	} {
		s, ok := parseServerArgs(c.argv, c.dev)
		if ok != c.ok || (ok && (s.spec.String() != c.spec || s.attach != c.attach || s.device != c.dev)) {
			t.Errorf("%q on %s: %+v %v, want %v %s attach %v", c.argv, c.dev, s, ok, c.ok, c.spec, c.attach)
		}
	}
}

// TestPrintNBDServers checks list-mapped's plain and JSON output against
// rbd-nbd's columns and keys.
func TestPrintNBDServers(t *testing.T) {
	servers := []nbdServer{
		{pid: 4242, spec: imageSpec{pool: "rbd", name: "img1"}, device: "/dev/nbd0", cookie: "c1"},
		{pid: 77, spec: imageSpec{pool: "p", ns: "ns", name: "img2", snap: "s"}, device: "/dev/nbd12", cookie: "0f3a"},
	}
	var b bytes.Buffer
	if err := printNBDServers(&b, servers, "plain", false); err != nil {
		t.Fatal(err)
	}
	want := "id    pool  namespace  image  snap  device      cookie\n" +
		"4242  rbd              img1   -     /dev/nbd0   c1    \n" +
		"77    p     ns         img2   s     /dev/nbd12  0f3a  \n"
	if b.String() != want {
		t.Errorf("plain:\n%q\nwant\n%q", b.String(), want)
	}
	b.Reset()
	if err := printNBDServers(&b, servers[:1], "json", false); err != nil {
		t.Fatal(err)
	}
	if w := `[{"id":4242,"pool":"rbd","namespace":"","image":"img1","snap":"","device":"/dev/nbd0","cookie":"c1"}]`; b.String() != w {
		t.Errorf("json: %s want %s", b.String(), w)
	}
	b.Reset()
	if err := printNBDServers(&b, nil, "plain", false); err != nil || b.Len() != 0 {
		t.Errorf("no devices, plain: %q %v", b.String(), err)
	}
	if err := printNBDServers(&b, nil, "json", false); err != nil || b.String() != "[]" {
		t.Errorf("no devices, json: %q %v", b.String(), err)
	}
	if err := printNBDServers(&b, nil, "yaml", false); err == nil || !strings.Contains(err.Error(), "invalid output format") {
		t.Errorf("yaml: %v", err)
	}
}

// TestRBDNBDMapFlags checks how rbd-nbd's options become nbd map's, and
// the values rbd-nbd refuses.
func TestRBDNBDMapFlags(t *testing.T) {
	o := newRBDNBDOptions()
	m, err := o.mapFlags("p/img@s", false)
	if err != nil {
		t.Fatal(err)
	}
	// no request timeout (resend after an attach), 30 s for an attach,
	// the device left to the kernel on SIGTERM, a snapshot read-only
	if m.timeout != 0 || m.resend == 0 || m.deadConnTimeout != 30*time.Second || !m.releaseOnExit || !m.readOnly || m.reattach || m.cookie == "" {
		t.Errorf("defaults: %+v", m)
	}
	o = newRBDNBDOptions()
	o.ioTimeout, o.reattach, o.device, o.cookie, o.notrim, o.showCookie, o.nbdsMax = 60, 5, "/dev/nbd7", "ck", true, true, 64
	if m, err = o.mapFlags("img", false); err != nil {
		t.Fatal(err)
	}
	if m.timeout != time.Minute || m.minTimeout != 0 || m.deadConnTimeout != 5*time.Second || m.index != 7 || m.cookie != "ck" ||
		!m.noTrim || !m.showCookie || m.module.NbdsMax != 64 || m.spec.String() != "rbd/img" {
		t.Errorf("options: %+v", m)
	}
	// attach takes the device by its cookie
	if m, err = o.mapFlags("img", true); err != nil || !m.reattach {
		t.Errorf("attach: %+v %v", m, err)
	}
	o.cookie = ""
	if _, err = o.mapFlags("img", true); err == nil {
		t.Error("attach without a cookie: no error")
	}
	for name, set := range map[string]func(o *rbdNBDOptions){
		"io-timeout":       func(o *rbdNBDOptions) { o.ioTimeout = -2 },
		"reattach-timeout": func(o *rbdNBDOptions) { o.reattach = -1 },
		"max_part":         func(o *rbdNBDOptions) { o.maxPart = 256 },
		"nbds_max":         func(o *rbdNBDOptions) { o.nbdsMax = -1 },
		"quiesce":          func(o *rbdNBDOptions) { o.quiesce = true },
		"encryption":       func(o *rbdNBDOptions) { o.encFormats = []string{"luks2"} },
		"encryption-count": func(o *rbdNBDOptions) {
			o.encFormats, o.encPassphrase = []string{"luks2", "luks1"}, []string{"a"}
		},
		"encryption-name": func(o *rbdNBDOptions) { o.encFormats, o.encPassphrase = []string{"luks3"}, []string{"a"} },
	} {
		o := newRBDNBDOptions()
		set(o)
		if _, err := o.mapFlags("img", false); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}
