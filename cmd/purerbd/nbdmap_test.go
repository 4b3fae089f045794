package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/purerbd/purerbd/internal/cli"
	"github.com/purerbd/purerbd/nbd/kernel"
)

// The kernel verbs need CAP_SYS_ADMIN and nbd.ko, which exist here only
// inside the VM; these tests cover their argument handling, and list's
// behaviour without the module.

func TestParseMapArgs(t *testing.T) {
	m, err := parseMapArgs([]string{"--conns", "4", "p/ns/img", "--timeout", "2.5", "--cookie", "c1", "--device", "/dev/nbd3"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if m.spec != (imageSpec{pool: "p", ns: "ns", name: "img"}) || m.conns != 4 || m.timeout != 2500*time.Millisecond ||
		m.cookie != "c1" || m.index != 3 || m.deadConnTimeout != defaultDeadConnTimeout || m.readOnly || m.reattach {
		t.Fatalf("parsed %+v", m)
	}
	m, err = parseMapArgs([]string{"img@snap"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if m.spec.pool != "rbd" || m.spec.snap != "snap" || !m.readOnly || m.index != kernel.AnyIndex || len(m.cookie) != 32 ||
		m.timeout != defaultTimeout || m.minTimeout != defaultMinTimeout || m.resend != defaultResend {
		t.Fatalf("defaults: %+v", m)
	}
	// Resending needs no timeout, one connection and a dead connection
	// timeout.
	for _, timed := range [][]string{{"--timeout", "30"}, {"--conns", "2"}, {"--dead-conn-timeout", "0"}} {
		m, err = parseMapArgs(append(timed, "img"), io.Discard)
		if err != nil || m.resend != 0 {
			t.Fatalf("%v: %+v, %v", timed, m, err)
		}
	}
	m, err = parseMapArgs([]string{"--resend-interval", "2", "img"}, io.Discard)
	if err != nil || m.resend != 2*time.Second {
		t.Fatalf("--resend-interval 2: %+v, %v", m, err)
	}
	// The timeout stays fixed without a floor, a ceiling or a dead
	// connection timeout.
	for _, fixed := range [][]string{{"--min-timeout", "0"}, {"--timeout", "0"}, {"--dead-conn-timeout", "0"}} {
		m, err = parseMapArgs(append(fixed, "img"), io.Discard)
		if err != nil || m.minTimeout != 0 {
			t.Fatalf("%v: %+v, %v", fixed, m, err)
		}
	}
	m, err = parseMapArgs([]string{"--min-timeout", "2", "--timeout", "10", "img"}, io.Discard)
	if err != nil || m.minTimeout != 2*time.Second || m.timeout != 10*time.Second {
		t.Fatalf("--min-timeout 2 --timeout 10: %+v, %v", m, err)
	}
	other, _ := parseMapArgs([]string{"img"}, io.Discard)
	if other.cookie == m.cookie {
		t.Error("two maps got the same random cookie")
	}
	m, err = parseMapArgs([]string{"--snap", "s", "--reattach", "--cookie", "k", "--release-on-exit", "img"}, io.Discard)
	if err != nil || m.spec.snap != "s" || !m.reattach || !m.releaseOnExit {
		t.Fatalf("%+v, %v", m, err)
	}
	m, err = parseMapArgs([]string{"--memory", "64M", "--cookie", "k"}, io.Discard)
	if err != nil || m.memory != 64<<20 || m.spec.name != "" {
		t.Fatalf("--memory: %+v, %v", m, err)
	}
	m, err = parseMapArgs([]string{"--file", "/tmp/disk", "--read-only"}, io.Discard)
	if err != nil || m.file != "/tmp/disk" || !m.readOnly {
		t.Fatalf("--file: %+v, %v", m, err)
	}
	for _, bad := range [][]string{
		{},
		{"--memory", "1M", "img"},
		{"--memory", "1M", "--file", "/tmp/x"},
		{"--memory", "x"},
		{"--memory", "0"},
		{"--file", "/tmp/x", "--snap", "s"},
		{"a", "b"},
		{"--conns", "0", "img"},
		{"--conns", "33", "img"},
		{"--timeout", "-1", "img"},
		{"--min-timeout", "-1", "img"},
		{"--reattach", "img"},
		{"--reattach", "--cookie", "k", "--device", "/dev/nbd0", "img"},
		{"--device", "/dev/sda", "img"},
		{"--exclusive", "--read-only", "img"},
		{"--snap", "a", "img@b"},
		{"/img"},
		{"--bogus", "img"},
	} {
		if _, err := parseMapArgs(bad, io.Discard); err == nil {
			t.Errorf("parseMapArgs(%q) accepted", bad)
		}
	}
}

func TestDeviceIndex(t *testing.T) {
	for in, want := range map[string]int{"/dev/nbd0": 0, "nbd12": 12, "/dev/nbd7": 7} {
		if got, err := deviceIndex(in); err != nil || got != want {
			t.Errorf("deviceIndex(%q) = %d, %v", in, got, err)
		}
	}
	for _, bad := range []string{"", "/dev/nbd", "/dev/nbd-1", "/dev/nbd01", "/dev/sda", "/dev/nbd1p1"} {
		if _, err := deviceIndex(bad); err == nil {
			t.Errorf("deviceIndex(%q) accepted", bad)
		}
	}
}

func TestNBDVerbs(t *testing.T) {
	ctx := context.Background()
	var out, errb bytes.Buffer
	if err := runNBD(ctx, nil, &out, &errb); err == nil || !strings.Contains(errb.String(), "map") {
		t.Errorf("no verb: %v, usage %q", err, errb.String())
	}
	if err := runNBD(ctx, []string{"bogus"}, &out, &errb); err == nil {
		t.Error("unknown verb accepted")
	}
	for _, args := range [][]string{
		{"serve", "--socket", "/tmp/x"},
		{"serve", "--memory", "1M", "--file", "/etc/hostname", "--socket", "/tmp/x"},
		{"serve", "--memory", "1M", "--image", "rbd/x", "--socket", "/tmp/x"},
		{"serve", "--memory", "1M", "--snap", "s", "--socket", "/tmp/x"},
		{"serve", "--image", "rbd/x"},
		{"serve", "--memory", "1M", "--socket", "/tmp/x", "extra"},
		{"unmap"},
		{"unmap", "/dev/nbd0", "--cookie", "c"},
		{"unmap", "/dev/sda"},
		{"list", "--format", "xml"},
	} {
		if err := runNBD(ctx, args, &out, io.Discard); err == nil {
			t.Errorf("nbd %q accepted", args)
		}
	}
	// --name names the client with --image, the export without it
	for _, c := range []struct {
		args               []string
		export, clientName string
	}{
		{[]string{"--socket", "s", "--image=rbd/x", "--name", "client.foo"}, "", "client.foo"},
		{[]string{"--socket", "s", "--image", "rbd/x", "--export-name", "e", "-n", "client.bar"}, "e", "client.bar"},
		{[]string{"--socket", "s", "--memory", "1M", "--name", "e"}, "e", ""},
		{[]string{"--socket", "s", "--memory", "1M", "--export-name", "a", "--name", "b"}, "b", ""},
		{[]string{"--socket", "s", "--memory", "1M", "--name", "a", "--export-name", "b"}, "b", ""},
	} {
		g, o := newGlobals(), newServeOptions()
		root := &cli.Command{Name: "purerbd"}
		g.register(root)
		root.Add(o.command(g))
		if _, err := cli.Parse(root, append([]string{"serve"}, c.args...)); err != nil {
			t.Errorf("nbd serve %q: %v", c.args, err)
			continue
		}
		if export := o.names(g); export != c.export || g.conn.Name != c.clientName {
			t.Errorf("nbd serve %q: export %q, client %q; want %q, %q", c.args, export, g.conn.Name, c.export, c.clientName)
		}
	}
}

// TestNBDList runs `nbd list` on this machine: without nbd.ko (outside
// the VM) it lists nothing and succeeds.
func TestNBDList(t *testing.T) {
	var out bytes.Buffer
	if err := runNBD(context.Background(), []string{"list", "--format", "json"}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	var l []mappedDevice
	if err := json.Unmarshal(out.Bytes(), &l); err != nil {
		t.Fatalf("list --format json: %v: %q", err, out.String())
	}
	out.Reset()
	if err := printMapped(&out, []mappedDevice{{Device: "/dev/nbd0", Cookie: "abc", Size: 256 << 20, Conns: 2}, {Device: "/dev/nbd1"}}, "plain"); err != nil {
		t.Fatal(err)
	}
	want := "device     size     conns  cookie\n/dev/nbd0  256 MiB  2      abc\n/dev/nbd1  0 B      0      -\n"
	if out.String() != want {
		t.Fatalf("list:\n%s\nwant:\n%s", out.String(), want)
	}
}
