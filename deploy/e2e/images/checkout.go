package images

import (
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// checkoutPackages are the commands built from the checkout, by binary
// name.
func checkoutPackages() map[string]string {
	return map[string]string{
		"purerbd-csi": "./cmd/purerbd-csi",
		"purerbd":     "./cmd/purerbd",
		"pause":       "./deploy/e2e/pause",
		"workload":    "./deploy/e2e/workload",
	}
}

// versionVar is the variable `make build` stamps the version into.
const versionVar = "github.com/purerbd/purerbd/internal/buildinfo.version"

// pauseDockerfile makes the pause image; like upstream's it runs as
// 65535.
const pauseDockerfile = `FROM scratch
COPY pause /pause
USER 65535:65535
ENTRYPOINT ["/pause"]
LABEL org.opencontainers.image.title="pause" \
      org.opencontainers.image.description="purerbd's e2e pod sandbox: blocks until SIGTERM, reaps children"
`

// workloadDockerfile makes the workload image: busybox's applets and
// /bin/workload, and nothing else.
const workloadDockerfile = `FROM scratch
COPY rootfs/ /
ENV PATH=/bin
CMD ["/bin/sh"]
LABEL org.opencontainers.image.title="workload" \
      org.opencontainers.image.description="purerbd's e2e workload: busybox and /bin/workload"
`

// checkoutImages builds purerbd-csi (as the manifests name it), pause
// and workload from the checkout.
func (b *builder) checkoutImages(ctx context.Context, pluginRef string) error {
	dir := checkoutDir(b.cache, b.root)
	work := filepath.Join(dir, "work")
	if err := os.RemoveAll(work); err != nil {
		return err
	}
	defer os.RemoveAll(work)
	bin := filepath.Join(work, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		return err
	}
	err := b.step("go build purerbd-csi purerbd pause workload", func() (bool, error) {
		args := []string{"build", "-trimpath", "-ldflags", "-s -w -X " + versionVar + "=" + gitVersion(ctx, b.root), "-o", bin + "/"}
		for _, p := range []string{"purerbd-csi", "purerbd", "pause", "workload"} {
			args = append(args, checkoutPackages()[p])
		}
		_, err := goCmd(ctx, b.root, args...)
		return false, err
	})
	if err != nil {
		return err
	}

	plugin := Image{Ref: pluginRef, Tar: filepath.Join(dir, "purerbd-csi.tar")}
	err = b.step("image "+plugin.Ref, func() (bool, error) {
		ctxDir := filepath.Join(work, "purerbd-csi")
		if err := writeContext(ctxDir, "", map[string]string{
			"purerbd-csi": filepath.Join(bin, "purerbd-csi"),
			"purerbd":     filepath.Join(bin, "purerbd"),
		}); err != nil {
			return false, err
		}
		return false, dockerImage(ctx, ctxDir, filepath.Join(b.root, "deploy", "Dockerfile"), plugin.Ref, plugin.Tar)
	})
	if err != nil {
		return err
	}

	pause := Image{Ref: PauseRef, Tar: filepath.Join(dir, "pause.tar")}
	err = b.step("image "+pause.Ref, func() (bool, error) {
		ctxDir := filepath.Join(work, "pause")
		if err := writeContext(ctxDir, pauseDockerfile, map[string]string{"pause": filepath.Join(bin, "pause")}); err != nil {
			return false, err
		}
		return false, dockerImage(ctx, ctxDir, "", pause.Ref, pause.Tar)
	})
	if err != nil {
		return err
	}

	workload := Image{Ref: WorkloadRef, Tar: filepath.Join(dir, "workload.tar")}
	err = b.step("image "+workload.Ref, func() (bool, error) {
		ctxDir := filepath.Join(work, "workload")
		if err := workloadContext(ctx, ctxDir, filepath.Join(bin, "workload")); err != nil {
			return false, err
		}
		return false, dockerImage(ctx, ctxDir, "", workload.Ref, workload.Tar)
	})
	if err != nil {
		return err
	}
	b.set.Images = append([]Image{plugin}, b.set.Images...)
	b.set.Images = append(b.set.Images, pause, workload)
	return nil
}

// workloadContext lays out the workload image's context in dir: in
// rootfs/ (copied whole, so that directories keep their modes), the
// host's static busybox with a symlink for each of its applets in bin/,
// the workload binary, and an empty world-writable tmp/.
func workloadContext(ctx context.Context, dir, workload string) error {
	busybox, err := staticBusybox()
	if err != nil {
		return err
	}
	if err := writeContext(dir, workloadDockerfile, map[string]string{
		"rootfs/bin/busybox":  busybox,
		"rootfs/bin/workload": workload,
	}); err != nil {
		return err
	}
	out, err := exec.CommandContext(ctx, busybox, "--list").Output()
	if err != nil {
		return fmt.Errorf("%s --list: %w", busybox, err)
	}
	applets := strings.Fields(string(out))
	if len(applets) == 0 {
		return fmt.Errorf("%s --list names no applet", busybox)
	}
	for _, a := range applets {
		if a == "busybox" || a == "workload" || strings.Contains(a, "/") {
			continue
		}
		if err := os.Symlink("busybox", filepath.Join(dir, "rootfs", "bin", a)); err != nil {
			return err
		}
	}
	tmp := filepath.Join(dir, "rootfs", "tmp")
	if err := os.Mkdir(tmp, 0o755); err != nil {
		return err
	}
	// Mkdir's mode goes through the umask; the sticky bit does not.
	return os.Chmod(tmp, os.ModeSticky|0o777)
}

// busyboxPath is where Debian's busybox-static installs busybox.
const busyboxPath = "/bin/busybox"

// staticBusybox returns the host's busybox after checking it is
// statically linked (an image FROM scratch has no libc for it).
func staticBusybox() (string, error) {
	f, err := elf.Open(busyboxPath)
	if err != nil {
		return "", fmt.Errorf("busybox for the workload image (Debian: busybox-static): %w", err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return "", errors.New(busyboxPath + " is dynamically linked: the workload image needs busybox-static")
		}
	}
	return busyboxPath, nil
}
