package main

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/purerbd/purerbd/internal/shorttier"
)

// TestContainerImage builds the FROM scratch image of deploy/Dockerfile
// around a static purerbd-csi and purerbd (as `make build` does) and runs
// `purerbd-csi --version` and `purerbd version` in it. It needs a Docker daemon (no registry:
// FROM scratch pulls nothing) and fails without one.
func TestContainerImage(t *testing.T) {
	shorttier.Skip(t, "a Docker daemon")
	if _, err := exec.LookPath("docker"); err != nil {
		t.Fatalf("docker is needed to build the image: %v", err)
	}
	dir := t.TempDir()
	const version = "v0.0.0-imagetest"
	build := exec.Command("go", "build", "-trimpath",
		"-ldflags", "-s -w -X github.com/purerbd/purerbd/internal/buildinfo.version="+version,
		"-o", dir+"/", ".", "../purerbd")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	var binSize int64
	for _, name := range []string{"purerbd-csi", "purerbd"} {
		bin, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		binSize += bin.Size()
	}

	b := make([]byte, 6)
	rand.Read(b)
	tag := "purerbd-csi-imagetest:" + hex.EncodeToString(b)
	docker := func(args ...string) string {
		t.Helper()
		out, err := exec.Command("docker", args...).CombinedOutput()
		if err != nil {
			t.Fatalf("docker %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return strings.TrimSpace(string(out))
	}
	docker("build", "-q", "-f", "../../deploy/Dockerfile", "-t", tag, dir)
	t.Cleanup(func() { exec.Command("docker", "rmi", "-f", tag).Run() })

	out := docker("run", "--rm", "--network=none", tag, "--version")
	if out != "purerbd-csi "+version {
		t.Errorf("purerbd-csi --version in the image printed %q", out)
	}
	// the CLI by its name alone: the image's PATH finds it
	out = docker("run", "--rm", "--network=none", "--entrypoint", "purerbd", tag, "version")
	if !strings.Contains(out, version) {
		t.Errorf("purerbd version in the image printed %q", out)
	}
	size, err := strconv.ParseInt(docker("image", "inspect", "-f", "{{.Size}}", tag), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	layers := docker("image", "inspect", "-f", "{{len .RootFS.Layers}}", tag)
	t.Logf("image %s: %.1f MiB (binaries %.1f MiB), %s layer(s)", tag, float64(size)/(1<<20), float64(binSize)/(1<<20), layers)
	if layers != "1" {
		t.Errorf("image has %s layers; FROM scratch plus one COPY makes one", layers)
	}
	if size > binSize+1<<20 {
		t.Errorf("image is %d bytes, the binaries %d: something besides them went in", size, binSize)
	}
}
