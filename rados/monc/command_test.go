package monc

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/purerbd/purerbd/rados/radostest"
)

// volatileKeys are JSON keys whose values change between two runs of the
// same command (clocks, ages, counters of the asking session).
var volatileKeys = map[string]bool{
	"quorum_age": true, "modified": true, "last_changed": true, "stamp": true,
	"last_updated": true, "created": true, "time": true, "age": true,
}

// normalize decodes JSON and drops volatile values, recursively.
func normalize(t testing.TB, what string, b []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%s: not JSON: %v\n%s", what, err, b)
	}
	return scrub(v)
}

func scrub(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if volatileKeys[k] || strings.HasSuffix(k, "_stamp") || strings.HasSuffix(k, "_age") {
				delete(x, k)
				continue
			}
			x[k] = scrub(e)
		}
	case []any:
		for i := range x {
			x[i] = scrub(x[i])
		}
	}
	return v
}

// diffJSON describes where a and b differ ("" when equal).
func diffJSON(path string, a, b any) []string {
	if reflect.DeepEqual(a, b) {
		return nil
	}
	am, aok := a.(map[string]any)
	bm, bok := b.(map[string]any)
	if aok && bok {
		keys := map[string]bool{}
		for k := range am {
			keys[k] = true
		}
		for k := range bm {
			keys[k] = true
		}
		var ks []string
		for k := range keys {
			ks = append(ks, k)
		}
		sort.Strings(ks)
		var out []string
		for _, k := range ks {
			out = append(out, diffJSON(path+"."+k, am[k], bm[k])...)
		}
		return out
	}
	al, aok := a.([]any)
	bl, bok := b.([]any)
	if aok && bok && len(al) == len(bl) {
		var out []string
		for i := range al {
			out = append(out, diffJSON(fmt.Sprintf("%s[%d]", path, i), al[i], bl[i])...)
		}
		return out
	}
	return []string{fmt.Sprintf("%s: %v != %v", path, a, b)}
}

// compareWithCLI runs a command through the client and through `ceph`
// and compares the parsed JSON.
func compareWithCLI(t *testing.T, c *Client, cl *radostest.Cluster, cmd map[string]any, cli ...string) {
	t.Helper()
	ctx := testContext(t, 30*time.Second)
	cmd["format"] = "json"
	out, outs, err := c.CommandJSON(ctx, cmd, nil)
	if err != nil {
		t.Fatalf("%v: %v (%s)", cmd, err, outs)
	}
	want, err := cl.Ceph(ctx, append(cli, "-f", "json")...)
	if err != nil {
		t.Fatal(err)
	}
	if d := diffJSON("", normalize(t, "purerbd", out), normalize(t, "ceph", want)); len(d) > 0 {
		t.Errorf("%s: purerbd and ceph differ:\n%s\npurerbd: %s\nceph:    %s", cmd["prefix"], strings.Join(d, "\n"), out, want)
	}
}

func TestCommandsMatchCLI(t *testing.T) {
	cl := sharedCluster(t)
	c := connect(t, adminConfig(t, cl))
	for _, tc := range []struct {
		cmd map[string]any
		cli []string
	}{
		{map[string]any{"prefix": "status"}, []string{"status"}},
		{map[string]any{"prefix": "df"}, []string{"df"}},
		{map[string]any{"prefix": "osd dump"}, []string{"osd", "dump"}},
		{map[string]any{"prefix": "osd pool ls", "detail": "detail"}, []string{"osd", "pool", "ls", "detail"}},
		{map[string]any{"prefix": "auth get", "entity": "client.admin"}, []string{"auth", "get", "client.admin"}},
		{map[string]any{"prefix": "mon dump"}, []string{"mon", "dump"}},
		{map[string]any{"prefix": "quorum_status"}, []string{"quorum_status"}},
	} {
		t.Run(strings.ReplaceAll(tc.cmd["prefix"].(string), " ", "_"), func(t *testing.T) {
			compareWithCLI(t, c, cl, tc.cmd, tc.cli...)
		})
	}
}

func TestCommandPoolCreate(t *testing.T) {
	cl := sharedCluster(t)
	c := connect(t, adminConfig(t, cl))
	ctx := testContext(t, 30*time.Second)
	_, outs, err := c.CommandJSON(ctx, map[string]any{"prefix": "osd pool create", "pool": "monc-create", "pg_num": 8}, nil)
	if err != nil {
		t.Fatalf("pool create: %v", err)
	}
	t.Logf("pool create: %q", outs)
	if !strings.Contains(outs, "monc-create") {
		t.Errorf("status %q does not name the pool", outs)
	}
	out, err := cl.Ceph(ctx, "osd", "pool", "ls", "-f", "json")
	if err != nil {
		t.Fatal(err)
	}
	var pools []string
	if err := json.Unmarshal(out, &pools); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, p := range pools {
		found = found || p == "monc-create"
	}
	if !found {
		t.Errorf("ceph osd pool ls: %v lacks the pool created", pools)
	}
	// created again: the monitor says so with return code 0, as for ceph
	_, outs2, err := c.CommandJSON(ctx, map[string]any{"prefix": "osd pool create", "pool": "monc-create", "pg_num": 8}, nil)
	if err != nil || !strings.Contains(outs2, "already exists") {
		t.Errorf("second create: %q, %v", outs2, err)
	}
	compareWithCLI(t, c, cl, map[string]any{"prefix": "osd pool ls"}, "osd", "pool", "ls")
}

func TestCommandErrors(t *testing.T) {
	cl := sharedCluster(t)
	c := connect(t, adminConfig(t, cl))
	ctx := testContext(t, 30*time.Second)
	out, outs, err := c.CommandJSON(ctx, map[string]any{"prefix": "osd pool get", "pool": "no-such-pool", "var": "size"}, nil)
	var ce *CommandError
	if !errors.As(err, &ce) || !errors.Is(err, syscall.ENOENT) {
		t.Fatalf("pool get of a missing pool: %v (out %q), want ENOENT", err, out)
	}
	if ce.Status != outs || ce.Prefix != "osd pool get" {
		t.Errorf("error %+v, status %q", ce, outs)
	}
	_, cliErr := cl.Ceph(ctx, "osd", "pool", "get", "no-such-pool", "size")
	if cliErr == nil || !strings.Contains(cliErr.Error(), outs) {
		t.Errorf("ceph said %v; we got status %q", cliErr, outs)
	}
	t.Logf("error: %v", err)

	_, _, err = c.Command(ctx, []string{`{"prefix":"no such command"}`}, nil)
	if !errors.Is(err, syscall.EINVAL) {
		t.Errorf("unknown command: %v, want EINVAL", err)
	}
	if _, _, err := c.Command(ctx, nil, nil); err == nil {
		t.Error("empty command accepted")
	}
}

// TestCommandInbuf sends an input buffer (config-key set reads the value
// from it) and reads it back through ceph.
func TestCommandInbuf(t *testing.T) {
	cl := sharedCluster(t)
	c := connect(t, adminConfig(t, cl))
	ctx := testContext(t, 30*time.Second)
	val := []byte("value from the input buffer\x00\xff")
	if _, outs, err := c.CommandJSON(ctx, map[string]any{"prefix": "config-key set", "key": "monc/test"}, val); err != nil {
		t.Fatalf("config-key set: %v (%s)", err, outs)
	}
	got, err := cl.Ceph(ctx, "config-key", "get", "monc/test")
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(val) {
		t.Errorf("ceph config-key get: %q, want %q", got, val)
	}
	out, _, err := c.CommandJSON(ctx, map[string]any{"prefix": "config-key get", "key": "monc/test"}, nil)
	if err != nil || string(out) != string(val) {
		t.Errorf("config-key get: %q, %v", out, err)
	}
}
