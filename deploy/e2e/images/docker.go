package images

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// dockerImage builds the image ref from the context directory ctxDir
// with dockerfile (a path; "" for ctxDir/Dockerfile), then saves it as a
// docker-archive to tar (written whole or not at all).
func dockerImage(ctx context.Context, ctxDir, dockerfile, ref, tar string) error {
	old, _ := dockerOutput(ctx, "image", "inspect", "-f", "{{.Id}}", ref)
	args := []string{"build", "-q", "-t", ref}
	if dockerfile != "" {
		args = append(args, "-f", dockerfile)
	}
	id, err := dockerOutput(ctx, append(args, ctxDir)...)
	if err != nil {
		return err
	}
	if old != "" && old != id {
		// The image ref named before this build; untagged now, it
		// would only pile up. It stays if anything still uses it.
		_, _ = dockerOutput(ctx, "rmi", old)
	}
	tmp := tar + ".tmp"
	if err := docker(ctx, "save", "-o", tmp, ref); err != nil {
		os.Remove(tmp)
		return err
	}
	// docker save writes 0600; the tar holds nothing secret
	if err := os.Chmod(tmp, 0o644); err != nil {
		return err
	}
	return replaceFile(tmp, tar)
}

// docker runs the docker client with the legacy builder: BuildKit needs
// the buildx plugin, and a FROM scratch image needs nothing it adds.
func docker(ctx context.Context, args ...string) error {
	_, err := dockerOutput(ctx, args...)
	return err
}

// dockerOutput runs docker as docker does and returns its stdout,
// trimmed.
func dockerOutput(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "docker", args...)
	cmd.Env = append(os.Environ(), "DOCKER_BUILDKIT=0")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("docker %s: %w\n%s%s", strings.Join(args, " "), err, tail(stdout.String()), tail(stderr.String()))
	}
	return strings.TrimSpace(stdout.String()), nil
}

// writeContext fills the build context dir with a Dockerfile and the
// given files (name in the context -> source path), hard-linked where
// possible.
func writeContext(dir, dockerfile string, files map[string]string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if dockerfile != "" {
		if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte(dockerfile), 0o644); err != nil {
			return err
		}
	}
	for name, src := range files {
		dst := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		if err := linkOrCopy(src, dst); err != nil {
			return err
		}
	}
	return nil
}

// linkOrCopy hard-links src to dst, or copies it (keeping its mode)
// across file systems.
func linkOrCopy(src, dst string) error {
	if err := os.Link(src, dst); err == nil {
		return nil
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	st, err := in.Stat()
	if err != nil {
		return err
	}
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, st.Mode().Perm())
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// tail returns the end of a command's output for an error message.
func tail(s string) string {
	const max = 4000
	if len(s) > max {
		return "..." + s[len(s)-max:]
	}
	return s
}
