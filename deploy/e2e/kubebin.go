package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"

	"github.com/purerbd/purerbd/deploy/e2e/images"
)

// kubeSources are the files of deploy/e2e/kube that decide the binary.
var kubeSources = []string{"go.mod", "go.sum", "main.go"}

// KubeBinary returns the multi-call Kubernetes binary built from
// deploy/e2e/kube (repoRoot is the checkout), building it into the cache
// when it is missing: minutes from an empty Go build cache. The cache key
// is a hash of the module's sources, so a new pin builds a new binary.
// Concurrent callers wait for one build (a lock file in the cache).
func KubeBinary(ctx context.Context, repoRoot string, log io.Writer) (string, error) {
	src := filepath.Join(repoRoot, "deploy", "e2e", "kube")
	h := sha256.New()
	for _, f := range kubeSources {
		b, err := os.ReadFile(filepath.Join(src, f))
		if err != nil {
			return "", fmt.Errorf("kube binary: %w", err)
		}
		fmt.Fprintf(h, "%s %d\n", f, len(b))
		h.Write(b)
	}
	gomod, err := os.ReadFile(filepath.Join(src, "go.mod"))
	if err != nil {
		return "", fmt.Errorf("kube binary: %w", err)
	}
	version, err := kubeVersion(gomod)
	if err != nil {
		return "", err
	}
	ldflags := kubeLDFlags(version)
	fmt.Fprintf(h, "ldflags %s\n", ldflags)
	dir := filepath.Join(images.DefaultCacheDir(), "k8s", version+"-"+hex.EncodeToString(h.Sum(nil))[:12])
	bin := filepath.Join(dir, "kube")
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("kube binary: %w", err)
	}
	lock, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", fmt.Errorf("kube binary: %w", err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", fmt.Errorf("kube binary: lock: %w", err)
	}
	if _, err := os.Stat(bin); err == nil {
		return bin, nil // built while we waited
	}
	fmt.Fprintf(log, "e2e: building the Kubernetes components from %s into %s (once; minutes)\n", src, dir)
	tmp := bin + ".tmp"
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-buildvcs=false", "-ldflags="+ldflags, "-o", tmp, ".")
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64")
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Run(); err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("kube binary: go build in %s: %w", src, err)
	}
	if err := os.Rename(tmp, bin); err != nil {
		return "", fmt.Errorf("kube binary: %w", err)
	}
	return bin, nil
}

// kubeVersion is the k8s.io/kubernetes version go.mod requires.
func kubeVersion(gomod []byte) (string, error) {
	m := regexp.MustCompile(`(?m)^\s*(?:require\s+)?k8s\.io/kubernetes\s+(v\d+\.\d+\.\d+)\s*$`).FindSubmatch(gomod)
	if m == nil {
		return "", fmt.Errorf("kube binary: deploy/e2e/kube/go.mod requires no k8s.io/kubernetes version")
	}
	return string(m[1]), nil
}

// kubeLDFlags stamps the release into the binary as Kubernetes' own
// build does (hack/lib/version.sh): the components report it to each
// other and the kubelet registers its node with it.
func kubeLDFlags(version string) string {
	major, rest, _ := strings.Cut(strings.TrimPrefix(version, "v"), ".")
	minor, _, _ := strings.Cut(rest, ".")
	var b strings.Builder
	b.WriteString("-s -w")
	for _, pkg := range []string{"k8s.io/component-base/version", "k8s.io/client-go/pkg/version"} {
		fmt.Fprintf(&b, " -X %s.gitVersion=%s -X %s.gitMajor=%s -X %s.gitMinor=%s -X %s.gitTreeState=clean",
			pkg, version, pkg, major, pkg, minor, pkg)
	}
	return b.String()
}
