package images

import (
	"bufio"
	"bytes"
	"context"
	"debug/elf"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purerbd/purerbd/internal/shorttier"
)

// testWriter sends a logger's lines to the test log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// TestBuild builds every image into the real cache (the sidecars take
// minutes the first time: run with -timeout 30m then), and checks each
// tar: its tag, its config, and that what it holds runs. The pause image
// is also run under docker to see it reap a pod's orphans, and every tar
// is imported into a private containerd with ctr, as the e2e VM does.
func TestBuild(t *testing.T) {
	shorttier.Skip(t, "docker, busybox-static, containerd and the Go module proxy")
	root := repoRoot(t)
	log := slog.New(slog.NewTextHandler(testWriter{t}, nil))
	set, err := Build(t.Context(), log, root, DefaultCacheDir())
	require.NoError(t, err)

	refs, err := manifestRefs(root)
	require.NoError(t, err)
	want := []string{refs.plugin, PauseRef, WorkloadRef, "registry.k8s.io/sig-storage/snapshot-controller:v8.6.0",
		"purerbd-e2e/snapshot-metadata-lister:v0.2.0"}
	require.Equal(t, "purerbd-e2e/snapshot-metadata-lister:v0.2.0", set.SnapshotMetadataLister)
	for _, ref := range refs.others {
		want = append(want, ref)
	}
	var got []string
	for _, im := range set.Images {
		got = append(got, im.Ref)
		st, err := os.Stat(im.Tar)
		require.NoError(t, err, im.Ref)
		t.Logf("%s: %s, %.1f MiB", im.Ref, im.Tar, float64(st.Size())/(1<<20))
	}
	require.ElementsMatch(t, want, got)
	for _, s := range set.Steps {
		t.Logf("step %s: %v (cached %v)", s.Name, s.Took, s.Cached)
	}

	for _, im := range set.Images {
		t.Run(strings.NewReplacer("/", "_", ":", "_").Replace(im.Ref), func(t *testing.T) {
			rootfs := t.TempDir()
			a, err := readArchive(im.Tar, rootfs)
			require.NoError(t, err)
			assert.Equal(t, []string{im.Ref}, a.RepoTags)
			repo, tag, _ := strings.Cut(im.Ref, ":")
			name := filepath.Base(repo)
			switch im.Ref {
			case refs.plugin:
				assert.Equal(t, []string{"/purerbd-csi"}, a.Config.Entrypoint)
				out := runOK(t, filepath.Join(rootfs, "purerbd-csi"), "--version")
				assert.Contains(t, out, "purerbd-csi")
				assert.Contains(t, a.Config.Env, "PATH=/", "the CLI is on the PATH of kubectl exec")
				out = runOK(t, filepath.Join(rootfs, "purerbd"), "version")
				assert.Contains(t, out, "purerbd")
			case PauseRef:
				assert.Equal(t, []string{"/pause"}, a.Config.Entrypoint)
				assert.Equal(t, "65535:65535", a.Config.User)
				checkPauseStops(t, filepath.Join(rootfs, "pause"))
			case WorkloadRef:
				assert.Contains(t, a.Config.Env, "PATH=/bin")
				checkWorkload(t, rootfs)
			case set.SnapshotMetadataLister:
				// upstream's example backup client: no --version, its
				// usage on -h
				assert.Equal(t, []string{"/" + name}, a.Config.Entrypoint)
				runOK(t, filepath.Join(rootfs, name), "-h")
			default:
				assert.Equal(t, []string{"/" + name}, a.Config.Entrypoint)
				out := runOK(t, filepath.Join(rootfs, name), "--version")
				assert.Equal(t, filepath.Join(rootfs, name)+" "+tag+"\n", out, "the sidecar reports its tag")
			}
		})
	}

	t.Run("snapshot metadata manifests", func(t *testing.T) {
		crd, err := os.ReadFile(set.SnapshotMetadataCRD)
		require.NoError(t, err)
		assert.Contains(t, string(crd), "name: snapshotmetadataservices.cbt.storage.k8s.io")
		role, err := os.ReadFile(set.SnapshotMetadataClientRole)
		require.NoError(t, err)
		assert.Contains(t, string(role), "name: external-snapshot-metadata-client-runner")
	})

	t.Run("snapshot manifests", func(t *testing.T) {
		require.Len(t, set.SnapshotCRDs, 6)
		for i, name := range []string{"volumesnapshotclasses.snapshot", "volumesnapshotcontents.snapshot", "volumesnapshots.snapshot",
			"volumegroupsnapshotclasses.groupsnapshot", "volumegroupsnapshotcontents.groupsnapshot", "volumegroupsnapshots.groupsnapshot"} {
			b, err := os.ReadFile(set.SnapshotCRDs[i])
			require.NoError(t, err)
			assert.Contains(t, string(b), "kind: CustomResourceDefinition")
			assert.Contains(t, string(b), "name: "+name+".storage.k8s.io")
		}
		require.Len(t, set.SnapshotController, 2)
		rbac, err := os.ReadFile(set.SnapshotController[0])
		require.NoError(t, err)
		assert.Contains(t, string(rbac), "kind: ClusterRole")
		deploy, err := os.ReadFile(set.SnapshotController[1])
		require.NoError(t, err)
		assert.Contains(t, string(deploy), "kind: Deployment")
		images := imageLine.FindAllStringSubmatch(string(deploy), -1)
		require.Len(t, images, 1)
		assert.Equal(t, "registry.k8s.io/sig-storage/snapshot-controller:v8.6.0", images[0][1])
		assert.NotEmpty(t, set.Tar(images[0][1]), "the Deployment's image is built")
		assert.Contains(t, string(deploy), `- "`+groupSnapshotGate+`"`+"\n            "+controllerArgsEnd, "group snapshots turned on")
	})
	t.Run("pause reaps", func(t *testing.T) { checkPauseReaps(t) })
	t.Run("ctr import", func(t *testing.T) { checkCtrImport(t, set) })
}

// runOK runs a program and returns its stdout, failing unless it exits 0.
func runOK(t *testing.T, prog string, args ...string) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(t.Context(), prog, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Run(), "%s %q\nstdout: %s\nstderr: %s", prog, args, &stdout, &stderr)
	return stdout.String()
}

// checkPauseStops starts pause and checks it runs until SIGTERM, then
// exits 0.
func checkPauseStops(t *testing.T, pause string) {
	var stderr bytes.Buffer
	cmd := exec.Command(pause)
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		t.Fatalf("pause exited by itself: %v\n%s", err, &stderr)
	case <-time.After(300 * time.Millisecond):
	}
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	select {
	case err := <-done:
		require.NoError(t, err, "pause exits 0 on SIGTERM")
		assert.Contains(t, stderr.String(), "Shutting down, got signal: terminated")
	case <-time.After(5 * time.Second):
		cmd.Process.Kill()
		t.Fatal("pause did not stop on SIGTERM")
	}
	assert.Equal(t, "purerbd-e2e-pause\n", runOK(t, pause, "-v"))
}

// checkWorkload checks the workload image's busybox and /bin/workload.
func checkWorkload(t *testing.T, rootfs string) {
	bin := filepath.Join(rootfs, "bin")
	f, err := elf.Open(filepath.Join(bin, "busybox"))
	require.NoError(t, err)
	for _, p := range f.Progs {
		assert.NotEqual(t, elf.PT_INTERP, p.Type, "busybox is static")
	}
	f.Close()
	for _, a := range []string{"sh", "ls", "cat", "dd", "sync", "df", "sleep", "kill", "pidof", "blockdev", "stat", "sha256sum", "mount", "umount", "mkdir", "rm", "echo", "test", "head"} {
		target, err := os.Readlink(filepath.Join(bin, a))
		if assert.NoError(t, err, a) {
			assert.Equal(t, "busybox", target, a)
		}
	}
	st, err := os.Stat(filepath.Join(rootfs, "tmp"))
	require.NoError(t, err)
	assert.Equal(t, os.ModeDir|os.ModeSticky|0o777, st.Mode(), "/tmp")
	assert.Equal(t, "ok 3\n", runOK(t, filepath.Join(bin, "sh"), "-c", "echo ok $((1+2))"))

	workload := filepath.Join(bin, "workload")
	data := filepath.Join(t.TempDir(), "data")
	runOK(t, workload, "write", "--path", data, "--count", "64", "--size", "4k", "--seed", "11")
	out := runOK(t, workload, "verify", "--path", data, "--count", "64", "--size", "4k", "--seed", "11")
	assert.Contains(t, out, `"ok":true`)

	// stream until SIGTERM, then check what it acknowledged
	ring := filepath.Join(t.TempDir(), "ring")
	var stdout bytes.Buffer
	cmd := exec.Command(workload, "stream", "--path", ring, "--size", "4k", "--interval", "5ms", "--slots", "32")
	cmd.Stdout = &stdout
	require.NoError(t, cmd.Start())
	time.Sleep(1500 * time.Millisecond)
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, cmd.Wait(), "stream exits 0 on SIGTERM")
	var lines []string
	sc := bufio.NewScanner(&stdout)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	require.GreaterOrEqual(t, len(lines), 2, "a progress line each second and a final line: %q", lines)
	var final struct {
		Writes     int64   `json:"writes"`
		Errors     int64   `json:"errors"`
		MaxStallMS float64 `json:"max_stall_ms"`
		LastIndex  int64   `json:"last_index"`
		Final      bool    `json:"final"`
	}
	require.NoError(t, json.Unmarshal([]byte(lines[len(lines)-1]), &final))
	assert.True(t, final.Final)
	assert.Zero(t, final.Errors)
	assert.Greater(t, final.Writes, int64(32))
	assert.Equal(t, final.Writes-1, final.LastIndex)
	out = runOK(t, workload, "verify-stream", "--path", ring, "--size", "4k", "--last-index", strconv.FormatInt(final.LastIndex, 10))
	assert.Contains(t, out, `"ok":true`)
}

// checkPauseReaps runs the pause image as docker would a pod sandbox and
// a second container in its PID namespace whose shell leaves orphans
// behind: they become pause's children, and pause must reap them.
func checkPauseReaps(t *testing.T) {
	name := fmt.Sprintf("purerbd-e2e-pause-test-%d", os.Getpid())
	id := strings.TrimSpace(dockerOut(t, "run", "-d", "--rm", "--network", "none", "--name", name, PauseRef))
	t.Cleanup(func() { exec.Command("docker", "rm", "-f", id).Run() })
	pid := strings.TrimSpace(dockerOut(t, "inspect", "-f", "{{.State.Pid}}", id))
	dockerOut(t, "run", "--rm", "--network", "none", "--pid", "container:"+id, WorkloadRef,
		"sh", "-c", "for i in 1 2 3 4 5; do sleep 0.2 & done; exit 0")
	// The orphans' parent is pause now; give them time to end.
	deadline := time.Now().Add(5 * time.Second)
	var children []string
	for {
		children = childrenOf(t, pid)
		if len(children) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	assert.Empty(t, children, "pause (pid %s) left children unreaped", pid)

	// docker stop sends SIGTERM, then SIGKILL after -t seconds
	start := time.Now()
	dockerOut(t, "stop", "-t", "10", id)
	assert.Less(t, time.Since(start), 5*time.Second, "pause stops on SIGTERM, not SIGKILL")
}

// childrenOf lists the processes whose parent is pid, with their state.
func childrenOf(t *testing.T, pid string) []string {
	var found []string
	dirs, err := os.ReadDir("/proc")
	require.NoError(t, err)
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join("/proc", d.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...
		s := string(b)
		fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(fields) > 1 && fields[1] == pid {
			found = append(found, d.Name()+" state "+fields[0])
		}
	}
	return found
}

// dockerOut runs docker and returns its stdout.
func dockerOut(t *testing.T, args ...string) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(t.Context(), "docker", args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Run(), "docker %q: %s", args, &stderr)
	return stdout.String()
}

// checkCtrImport starts a private containerd (its own root, state and
// socket under a temp dir), imports every tar into the k8s.io namespace
// with ctr, as the e2e VM does, and checks every reference is listed.
func checkCtrImport(t *testing.T, set *Set) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "containerd.sock")
	config := fmt.Sprintf(`version = 2
root = %q
state = %q
disabled_plugins = ["io.containerd.grpc.v1.cri"]
[grpc]
  address = %q
`, filepath.Join(dir, "root"), filepath.Join(dir, "state"), sock)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "config.toml"), []byte(config), 0o644))
	var logs bytes.Buffer
	ctrd := exec.Command("containerd", "--config", filepath.Join(dir, "config.toml"))
	ctrd.Stdout, ctrd.Stderr = &logs, &logs
	require.NoError(t, ctrd.Start())
	defer func() {
		ctrd.Process.Signal(syscall.SIGTERM)
		if err := ctrd.Wait(); err != nil {
			t.Logf("containerd: %v", err)
		}
	}()
	ctr := func(args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
		defer cancel()
		out, err := exec.CommandContext(ctx, "ctr", append([]string{"--address", sock, "--namespace", "k8s.io"}, args...)...).CombinedOutput()
		return string(out), err
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		_, err := ctr("version")
		if err == nil {
			break
		}
		require.True(t, time.Now().Before(deadline), "containerd did not come up: %v\n%s", err, &logs)
		time.Sleep(100 * time.Millisecond)
	}
	for _, im := range set.Images {
		out, err := ctr("images", "import", im.Tar)
		require.NoError(t, err, "ctr images import %s:\n%s", im.Tar, out)
	}
	out, err := ctr("images", "ls", "-q")
	require.NoError(t, err, out)
	listed := strings.Fields(out)
	for _, im := range set.Images {
		assert.Contains(t, listed, normalizedRef(im.Ref), "ctr lists %s", im.Ref)
	}
}

// normalizedRef is the reference as containerd (and the kubelet) name
// an image: with docker.io/ (and library/) when no registry is given.
func normalizedRef(ref string) string {
	first, _, hasSlash := strings.Cut(ref, "/")
	switch {
	case !hasSlash:
		return "docker.io/library/" + ref
	case strings.ContainsAny(first, ".:") || first == "localhost":
		return ref
	}
	return "docker.io/" + ref
}
