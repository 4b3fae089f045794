package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/purerbd/purerbd/rados/radostest"
)

// cliRun runs a built binary and returns its outputs and exit status.
type cliRun func(env []string, args ...string) (stdout, stderr string, code int)

// buildBinary builds purerbd as `make build` does and returns its path.
func buildBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "purerbd")
	cmd := exec.Command("go", "build", "-trimpath", "-o", bin, ".")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// buildCLI builds purerbd as `make build` does and returns how to run it.
func buildCLI(t *testing.T) cliRun {
	t.Helper()
	bin := buildBinary(t)
	return func(env []string, args ...string) (string, string, int) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Env = append(cleanEnv(), env...)
		var o, e bytes.Buffer
		cmd.Stdout, cmd.Stderr = &o, &e
		err := cmd.Run()
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatalf("running purerbd %v: %v", args, err)
		}
		return o.String(), e.String(), cmd.ProcessState.ExitCode()
	}
}

// cleanEnv is the environment without Ceph's variables.
func cleanEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CEPH_ARGS=") && !strings.HasPrefix(kv, "CEPH_CONF=") {
			out = append(out, kv)
		}
	}
	return out
}

// sameJSON reports whether two JSON texts hold the same value.
func sameJSON(t *testing.T, a, b string) bool {
	t.Helper()
	var va, vb any
	if err := json.Unmarshal([]byte(a), &va); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, a)
	}
	if err := json.Unmarshal([]byte(b), &vb); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, b)
	}
	return reflect.DeepEqual(va, vb)
}

// TestMonAndStatusVerbs runs the built CLI against a test cluster and
// compares what it prints with the ceph tool.
func TestMonAndStatusVerbs(t *testing.T) {
	radostest.SkipShort(t) // before building the CLI
	run := buildCLI(t)
	cl := radostest.New(t, radostest.Options{})
	ctx := context.Background()
	t.Run("mon_command", func(t *testing.T) { testMonCommand(t, ctx, run, cl) })
	t.Run("status", func(t *testing.T) { testStatus(t, ctx, run, cl) })
}

func testMonCommand(t *testing.T, ctx context.Context, run cliRun, cl *radostest.Cluster) {
	// output buffer: equal to ceph's
	out, errOut, code := run(nil, "mon", "command", "-c", cl.Conf, `{"prefix":"osd pool ls","format":"json"}`)
	want, err := cl.Ceph(ctx, "osd", "pool", "ls", "-f", "json")
	if err != nil {
		t.Fatal(err)
	}
	if code != 0 || errOut != "" || !sameJSON(t, out, string(want)) {
		t.Errorf("osd pool ls: exit %d, stdout %q, stderr %q; ceph printed %q", code, out, errOut, want)
	}

	// status string on stderr, as ceph prints it
	_, errOut, code = run(nil, "mon", "command", "-c", cl.Conf, `{"prefix":"osd pool create",`, `"pool":"cli-pool","pg_num":8}`)
	if code != 0 || errOut != "pool 'cli-pool' created\n" {
		t.Errorf("pool create: exit %d, stderr %q", code, errOut)
	}

	// a failure: ceph's message and exit status
	_, errOut, code = run(nil, "mon", "command", `{"prefix":"osd pool get","pool":"nope","var":"size"}`, "--conf", cl.Conf)
	_, cephErr := cl.Ceph(ctx, "osd", "pool", "get", "nope", "size")
	var te interface{ ExitCode() int }
	if !errors.As(cephErr, &te) {
		t.Fatalf("ceph: %v", cephErr)
	}
	if code != te.ExitCode() || code != 2 || errOut != "Error ENOENT: unrecognized pool 'nope'\n" || !strings.Contains(cephErr.Error(), strings.TrimSpace(errOut)) {
		t.Errorf("pool get of a missing pool: exit %d, stderr %q; ceph: exit %d, %v", code, errOut, te.ExitCode(), cephErr)
	}

	// input and output files; the environment instead of flags
	dir := t.TempDir()
	in, outFile := filepath.Join(dir, "in"), filepath.Join(dir, "out")
	os.WriteFile(in, []byte("from a file"), 0o644)
	env := []string{"CEPH_CONF=" + cl.Conf, "CEPH_ARGS=--id admin"}
	if _, errOut, code := run(env, "mon", "command", `{"prefix":"config-key set","key":"cli/k"}`, "-i", in); code != 0 {
		t.Errorf("config-key set: exit %d, %s", code, errOut)
	}
	if _, errOut, code := run(env, "mon", "command", `{"prefix":"config-key get","key":"cli/k"}`, "-o", outFile); code != 0 {
		t.Errorf("config-key get: exit %d, %s", code, errOut)
	}
	if b, _ := os.ReadFile(outFile); string(b) != "from a file" {
		t.Errorf("config-key get wrote %q", b)
	}

	// explicit monitors and keyring, no ceph.conf
	out, errOut, code = run(nil, "mon", "command", "--no-config-file", "-m", strings.Join(cl.MonAddrs, ","), "-k", cl.AdminKeyring,
		"--ms-mode", "secure", `{"prefix":"mon dump","format":"json"}`)
	if code != 0 || !strings.Contains(out, cl.FSID) {
		t.Errorf("mon dump with -m and -k: exit %d, stdout %q, stderr %q", code, out, errOut)
	}

	// bad input and unreachable monitors fail clearly
	_, errOut, code = run(nil, "mon", "command", "-c", cl.Conf, `{"prefix":`)
	if code != 1 || !strings.Contains(errOut, "not JSON") {
		t.Errorf("bad JSON: exit %d, stderr %q", code, errOut)
	}
	t0 := time.Now()
	_, errOut, code = run(nil, "mon", "command", "--no-config-file", "-m", "127.0.0.1:1", "-k", cl.AdminKeyring,
		"--connect-timeout", "1", `{"prefix":"status"}`)
	// a 1 s timeout; the margin is for starting the process on a busy machine
	if took := time.Since(t0); code != 1 || !strings.Contains(errOut, "127.0.0.1:1") || took > 5*time.Second {
		t.Errorf("unreachable monitor: exit %d after %v, stderr %q", code, took, errOut)
	}
	_, errOut, code = run(nil, "mon", "command", "-c", cl.Conf, "--id", "nobody", `{"prefix":"status"}`)
	if code != 1 || !strings.Contains(errOut, "no key for client.nobody") {
		t.Errorf("unknown identity: exit %d, stderr %q", code, errOut)
	}
}
