package images

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
)

// goCmd runs the go command in dir for a static build (CGO_ENABLED=0)
// of that directory's own module (GOWORK=off) and returns its stdout.
func goCmd(ctx context.Context, dir string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOWORK=off")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("go %s (in %s): %w\n%s", strings.Join(args, " "), dir, err, tail(stderr.String()))
	}
	return stdout.Bytes(), nil
}

// moduleDir returns where the module cache holds module path at the
// version dir's module requires, downloading it first if needed.
func moduleDir(ctx context.Context, dir, path string) (string, error) {
	out, err := goCmd(ctx, dir, "mod", "download", "-json", path)
	if err != nil {
		return "", err
	}
	var m struct{ Dir, Error string }
	if err := json.Unmarshal(out, &m); err != nil {
		return "", fmt.Errorf("go mod download -json %s: %w", path, err)
	}
	if m.Error != "" || m.Dir == "" {
		return "", fmt.Errorf("go mod download %s: %s", path, m.Error)
	}
	return m.Dir, nil
}

// gitVersion is the checkout's version as `make build` stamps it: git
// describe, or "devel" outside git.
func gitVersion(ctx context.Context, root string) string {
	cmd := exec.CommandContext(ctx, "git", "describe", "--tags", "--always", "--dirty")
	cmd.Dir = root
	out, err := cmd.Output()
	if v := strings.TrimSpace(string(out)); err == nil && v != "" {
		return v
	}
	return "devel"
}
