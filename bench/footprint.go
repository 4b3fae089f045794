package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Footprint is what purerbd costs on disk and in memory, beside the
// figures of its peers where there is one.
type Footprint struct {
	Binaries []Binary
	// Image is the container image built from deploy/Dockerfile; empty
	// with ImageNote saying why when it could not be built.
	Image     string
	ImageSize int64
	ImageNote string
	// Peers lists what the C stack (the rbd CLI, as ceph-csi's node
	// plugin runs it, and every shared library it loads) occupies on
	// disk; PeerNote says how it was found.
	Peers    []Binary
	PeerNote string
}

// footprint records binary sizes and builds the container image.
func (s *suite) footprint(ctx context.Context) *Footprint {
	f := &Footprint{Binaries: sortedBinaries(s.bins)}
	f.Peers, f.PeerNote = cStack(ctx)
	dockerfile := filepath.Join(s.cfg.Root, "deploy", "Dockerfile")
	csi, ok := s.bins["purerbd-csi"]
	switch {
	case !fileExists(dockerfile):
		f.ImageNote = "deploy/Dockerfile does not exist"
	case !ok:
		f.ImageNote = "no purerbd-csi binary was built"
	case haveTools("docker") != "":
		f.ImageNote = "docker is not installed"
	case s.bins["purerbd"].Path == "":
		f.ImageNote = "no purerbd binary was built"
	default:
		f.Image, f.ImageSize, f.ImageNote = s.buildImage(ctx, dockerfile, csi, s.bins["purerbd"])
	}
	return f
}

// buildImage builds deploy/Dockerfile with a directory holding the
// purerbd-csi and purerbd binaries as its context (as deploy/Dockerfile
// says) and returns the image's size.
func (s *suite) buildImage(ctx context.Context, dockerfile string, bins ...Binary) (string, int64, string) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	tag := "purerbd-bench/purerbd-csi:bench"
	bctx := filepath.Join(s.work, "image")
	if err := os.MkdirAll(bctx, 0o755); err != nil {
		return "", 0, err.Error()
	}
	for _, bin := range bins {
		b, err := os.ReadFile(bin.Path)
		if err == nil {
			err = os.WriteFile(filepath.Join(bctx, filepath.Base(bin.Path)), b, 0o755)
		}
		if err != nil {
			return "", 0, err.Error()
		}
	}
	abs, _ := filepath.Abs(dockerfile)
	if out, err := exec.CommandContext(ctx, "docker", "build", "-q", "-f", abs, "-t", tag, bctx).CombinedOutput(); err != nil {
		return "", 0, fmt.Sprintf("docker build failed: %v: %s", err, lastLines(out, 3))
	}
	out, err := exec.CommandContext(ctx, "docker", "image", "inspect", "-f", "{{.Size}}", tag).Output()
	if err != nil {
		return "", 0, fmt.Sprintf("docker image inspect: %v", err)
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64)
	if err != nil {
		return "", 0, fmt.Sprintf("docker image inspect: %v", err)
	}
	_ = exec.CommandContext(ctx, "docker", "image", "rm", "-f", tag).Run()
	return tag, n, ""
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// cStack lists the rbd CLI (and rbd-nbd when installed) with every shared
// library ldd resolves for them, each file once.
func cStack(ctx context.Context) ([]Binary, string) {
	seen := map[string]bool{}
	var files []Binary
	add := func(path string) {
		real, err := filepath.EvalSymlinks(path)
		if err != nil || seen[real] {
			return
		}
		seen[real] = true
		if fi, err := os.Stat(real); err == nil {
			files = append(files, Binary{Name: filepath.Base(path), Path: real, Size: fi.Size()})
		}
	}
	var roots []string
	for _, p := range []string{"/usr/bin/rbd", "/usr/bin/rbd-nbd"} {
		if fileExists(p) {
			roots = append(roots, p)
		}
	}
	if len(roots) == 0 {
		return nil, "the rbd CLI is not installed"
	}
	for _, r := range roots {
		add(r)
		out, err := exec.CommandContext(ctx, "ldd", r).Output()
		if err != nil {
			return files, fmt.Sprintf("ldd %s: %v", r, err)
		}
		for _, l := range strings.Split(string(out), "\n") {
			if _, rest, ok := strings.Cut(l, "=> "); ok {
				if path, _, ok := strings.Cut(strings.TrimSpace(rest), " "); ok && strings.HasPrefix(path, "/") {
					add(path)
				}
			}
		}
	}
	return files, strings.Join(roots, " and ") + " with every shared library ldd resolves"
}
