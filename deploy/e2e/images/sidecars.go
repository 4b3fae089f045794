package images

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// sidecarModuleDir is the nested module that pins the sidecars, relative
// to the checkout.
const sidecarModuleDir = "deploy/e2e/sidecars"

// sidecarRegistry is the repository prefix upstream publishes the
// sidecar images under, as the manifests name them.
const sidecarRegistry = "registry.k8s.io/sig-storage/"

// snapshotClientModule holds the snapshot and group snapshot CRDs.
const snapshotClientModule = "github.com/kubernetes-csi/external-snapshotter/client/v8"

// snapshotterModule holds the snapshot-controller's manifests.
const snapshotterModule = "github.com/kubernetes-csi/external-snapshotter/v8"

// snapshotMetadataModule is the external-snapshot-metadata sidecar's:
// changed-block tracking (deploy/kubernetes/snapshot-metadata) and the
// example backup client the e2e run lists blocks with.
const snapshotMetadataModule = "github.com/kubernetes-csi/external-snapshot-metadata"

// snapshotMetadataClientModule holds the SnapshotMetadataService CRD.
const snapshotMetadataClientModule = "github.com/kubernetes-csi/external-snapshot-metadata/client"

// snapshotMetadataCRD is the SnapshotMetadataService CRD in the client
// module: a cluster add-on, like the snapshot CRDs.
const snapshotMetadataCRD = "config/crd/cbt.storage.k8s.io_snapshotmetadataservices.yaml"

// snapshotMetadataClientRole is upstream's ClusterRole for backup
// applications (snapshot-metadata clients), in the sidecar's module.
const snapshotMetadataClientRole = "deploy/snapshot-metadata-client-cluster-role.yaml"

// localRegistry prefixes the images the e2e run builds that upstream
// publishes no image of.
const localRegistry = "purerbd-e2e/"

// sidecarRecipe versions how this file turns binaries into images; a
// change to it rebuilds the cached sidecars.
const sidecarRecipe = "3"

// sidecarSource is one upstream module and the commands taken from it.
type sidecarSource struct {
	module   string
	short    string   // its name in the cache directory's
	cmds     []string // command directories in the module
	registry string   // the images' repository prefix; "" is sidecarRegistry
}

// sidecarSources are the modules deploy/e2e/sidecars pins.
func sidecarSources() []sidecarSource {
	return []sidecarSource{
		{module: "github.com/kubernetes-csi/external-provisioner/v6", short: "provisioner", cmds: []string{"cmd/csi-provisioner"}},
		{module: snapshotterModule, short: "snapshotter", cmds: []string{"cmd/csi-snapshotter", "cmd/snapshot-controller"}},
		{module: "github.com/kubernetes-csi/external-resizer/v2", short: "resizer", cmds: []string{"cmd/csi-resizer"}},
		{module: snapshotMetadataModule, short: "snapshotmetadata", cmds: []string{"cmd/csi-snapshot-metadata"}},
		{module: snapshotMetadataModule, short: "lister", cmds: []string{"examples/snapshot-metadata-lister"}, registry: localRegistry},
	}
}

// snapshotCRDs are the CRD files of snapshot.storage.k8s.io and
// groupsnapshot.storage.k8s.io in the client module, in the order to
// apply them: the controller and the sidecar, with their group snapshot
// gate on, need both sets.
func snapshotCRDs() []string {
	return []string{
		"config/crd/snapshot.storage.k8s.io_volumesnapshotclasses.yaml",
		"config/crd/snapshot.storage.k8s.io_volumesnapshotcontents.yaml",
		"config/crd/snapshot.storage.k8s.io_volumesnapshots.yaml",
		"config/crd/groupsnapshot.storage.k8s.io_volumegroupsnapshotclasses.yaml",
		"config/crd/groupsnapshot.storage.k8s.io_volumegroupsnapshotcontents.yaml",
		"config/crd/groupsnapshot.storage.k8s.io_volumegroupsnapshots.yaml",
	}
}

// groupSnapshotGate is the flag that turns VolumeGroupSnapshots on in
// the snapshot-controller and the csi-snapshotter sidecar (v8.2 on;
// v7 had --enable-volume-group-snapshots).
const groupSnapshotGate = "--feature-gates=CSIVolumeGroupSnapshot=true"

// controllerArgsEnd is the line upstream's snapshot-controller
// Deployment marks the end of its arguments with, for deployments to add
// theirs before.
const controllerArgsEnd = "# end snapshot controller args"

// snapshotControllerManifests are the snapshot-controller's manifests in
// the snapshotter module: RBAC first.
func snapshotControllerManifests() []string {
	return []string{
		"deploy/kubernetes/snapshot-controller/rbac-snapshot-controller.yaml",
		"deploy/kubernetes/snapshot-controller/setup-snapshot-controller.yaml",
	}
}

// sidecarCmd is one command to build and package.
type sidecarCmd struct {
	pkg      string // import path
	name     string // binary and image name
	module   string
	version  string
	registry string
}

func (c sidecarCmd) ref() string { return c.registry + c.name + ":" + c.version }

// sidecarPlan reads the pinned versions from the nested module's go.mod
// and returns the commands, and the cache directory name they get (the
// versions, and a hash of go.mod, go.sum and the recipe).
func sidecarPlan(root string) ([]sidecarCmd, string, error) {
	dir := filepath.Join(root, sidecarModuleDir)
	gomod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		return nil, "", err
	}
	gosum, err := os.ReadFile(filepath.Join(dir, "go.sum"))
	if err != nil {
		return nil, "", err
	}
	var cmds []sidecarCmd
	name := "sidecars"
	for _, s := range sidecarSources() {
		v, err := requiredVersion(gomod, s.module)
		if err != nil {
			return nil, "", err
		}
		name += "-" + s.short + "-" + v
		reg := s.registry
		if reg == "" {
			reg = sidecarRegistry
		}
		for _, c := range s.cmds {
			cmds = append(cmds, sidecarCmd{pkg: s.module + "/" + c, name: path.Base(c), module: s.module, version: v, registry: reg})
		}
	}
	h := sha256.New()
	for _, b := range [][]byte{gomod, gosum, []byte(sidecarRecipe)} {
		h.Write(b)
		h.Write([]byte{0})
	}
	return cmds, name + "-" + hex.EncodeToString(h.Sum(nil)[:4]), nil
}

// requiredVersion returns the version go.mod requires of module.
func requiredVersion(gomod []byte, module string) (string, error) {
	re := regexp.MustCompile(`(?m)^\s*(?:require\s+)?` + regexp.QuoteMeta(module) + `\s+(v\S+)`)
	m := re.FindSubmatch(gomod)
	if m == nil {
		return "", fmt.Errorf("%s/go.mod requires no %s", sidecarModuleDir, module)
	}
	return string(m[1]), nil
}

// checkSidecarRefs checks that every image the manifests name besides
// purerbd-csi is one the sidecar module builds, at the same tag.
func checkSidecarRefs(cmds []sidecarCmd, refs manifestImages) error {
	built := map[string]string{}
	for _, c := range cmds {
		built[c.name] = c.ref()
	}
	for name, ref := range refs.others {
		switch b, ok := built[name]; {
		case !ok:
			return fmt.Errorf("the manifests name %s, which %s does not build", ref, sidecarModuleDir)
		case b != ref:
			return fmt.Errorf("the manifests name %s, but %s pins %s", ref, sidecarModuleDir, b)
		}
	}
	return nil
}

// sidecars makes the sidecar images, CRDs and snapshot-controller
// manifests, unless the cache has them for these versions already.
func (b *builder) sidecars(ctx context.Context, refs manifestImages) error {
	cmds, name, err := sidecarPlan(b.root)
	if err != nil {
		return fmt.Errorf("images: %w", err)
	}
	if err := checkSidecarRefs(cmds, refs); err != nil {
		return fmt.Errorf("images: %w", err)
	}
	final := filepath.Join(b.cache, name)
	err = b.step("sidecars "+name, func() (bool, error) {
		if _, err := os.Stat(filepath.Join(final, completeStamp)); err == nil {
			return true, nil
		}
		tmp := final + ".tmp"
		if err := os.RemoveAll(tmp); err != nil {
			return false, err
		}
		if err := b.buildSidecars(ctx, cmds, tmp); err != nil {
			return false, err
		}
		if err := os.RemoveAll(final); err != nil {
			return false, err
		}
		return false, os.Rename(tmp, final)
	})
	if err != nil {
		return err
	}
	for _, c := range cmds {
		b.set.Images = append(b.set.Images, Image{Ref: c.ref(), Tar: filepath.Join(final, "images", c.name+".tar")})
	}
	for _, f := range snapshotCRDs() {
		b.set.SnapshotCRDs = append(b.set.SnapshotCRDs, filepath.Join(final, "crd", path.Base(f)))
	}
	for _, f := range snapshotControllerManifests() {
		b.set.SnapshotController = append(b.set.SnapshotController, filepath.Join(final, "snapshot-controller", path.Base(f)))
	}
	b.set.SnapshotMetadataCRD = filepath.Join(final, "crd", path.Base(snapshotMetadataCRD))
	b.set.SnapshotMetadataClientRole = filepath.Join(final, "snapshot-metadata", path.Base(snapshotMetadataClientRole))
	for _, c := range cmds {
		if c.registry == localRegistry {
			b.set.SnapshotMetadataLister = c.ref()
		}
	}
	return nil
}

// completeStamp marks a finished sidecar directory; it is written last.
const completeStamp = ".complete"

// buildSidecars builds every sidecar command in one go build (they share
// client-go and most else), packages each as an image, and copies the
// CRDs and the snapshot-controller manifests, all into dir.
func (b *builder) buildSidecars(ctx context.Context, cmds []sidecarCmd, dir string) error {
	modDir := filepath.Join(b.root, sidecarModuleDir)
	bin := filepath.Join(dir, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		return err
	}
	// Each command gets its module's version as main.version, which
	// its --version prints, as upstream's release builds do.
	args := []string{"build", "-trimpath"}
	var pkgs []string
	for _, c := range cmds {
		args = append(args, "-ldflags="+c.pkg+"=-s -w -X main.version="+c.version)
		pkgs = append(pkgs, c.pkg)
	}
	args = append(append(args, "-o", bin+"/"), pkgs...)
	b.log.Info("images: building the sidecars (minutes, once per version set)", "packages", strings.Join(pkgs, " "))
	if _, err := goCmd(ctx, modDir, args...); err != nil {
		return err
	}

	clientDir, err := moduleDir(ctx, modDir, snapshotClientModule)
	if err != nil {
		return err
	}
	for _, f := range snapshotCRDs() {
		if err := copyInto(filepath.Join(clientDir, f), filepath.Join(dir, "crd", path.Base(f)), nil); err != nil {
			return err
		}
	}
	smClientDir, err := moduleDir(ctx, modDir, snapshotMetadataClientModule)
	if err != nil {
		return err
	}
	if err := copyInto(filepath.Join(smClientDir, snapshotMetadataCRD), filepath.Join(dir, "crd", path.Base(snapshotMetadataCRD)), nil); err != nil {
		return err
	}
	smDir, err := moduleDir(ctx, modDir, snapshotMetadataModule)
	if err != nil {
		return err
	}
	if err := copyInto(filepath.Join(smDir, snapshotMetadataClientRole), filepath.Join(dir, "snapshot-metadata", path.Base(snapshotMetadataClientRole)), nil); err != nil {
		return err
	}
	var controller sidecarCmd
	for _, c := range cmds {
		if c.name == "snapshot-controller" {
			controller = c
		}
	}
	snapDir, err := moduleDir(ctx, modDir, snapshotterModule)
	if err != nil {
		return err
	}
	for _, f := range snapshotControllerManifests() {
		var edit func([]byte) ([]byte, error)
		if strings.HasPrefix(path.Base(f), "setup-") {
			// the Deployment: upstream's tag is not always the
			// release's own, and group snapshots are off by default
			edit = func(b []byte) ([]byte, error) {
				b, err := setImage(b, sidecarRegistry+controller.name, controller.ref())
				if err != nil {
					return nil, err
				}
				return addArg(b, controllerArgsEnd, groupSnapshotGate)
			}
		}
		if err := copyInto(filepath.Join(snapDir, f), filepath.Join(dir, "snapshot-controller", path.Base(f)), edit); err != nil {
			return err
		}
	}

	for _, c := range cmds {
		ctxDir := filepath.Join(dir, "context", c.name)
		dockerfile := fmt.Sprintf(`FROM scratch
COPY %[1]s /%[1]s
ENTRYPOINT ["/%[1]s"]
LABEL org.opencontainers.image.title="%[1]s" \
      org.opencontainers.image.version="%[2]s" \
      org.opencontainers.image.source="https://%[3]s" \
      org.opencontainers.image.description="%[1]s built from %[3]s@%[2]s for purerbd's e2e run"
`, c.name, c.version, repoOf(c.module))
		if err := writeContext(ctxDir, dockerfile, map[string]string{c.name: filepath.Join(bin, c.name)}); err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Join(dir, "images"), 0o755); err != nil {
			return err
		}
		if err := dockerImage(ctx, ctxDir, "", c.ref(), filepath.Join(dir, "images", c.name+".tar")); err != nil {
			return err
		}
	}
	if err := os.RemoveAll(filepath.Join(dir, "context")); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, completeStamp), []byte(strings.Join(pkgs, "\n")+"\n"), 0o644)
}

// copyInto copies src to dst, through edit when it is not nil.
func copyInto(src, dst string, edit func([]byte) ([]byte, error)) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	if edit != nil {
		if b, err = edit(b); err != nil {
			return fmt.Errorf("%s: %w", src, err)
		}
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	return os.WriteFile(dst, b, 0o644)
}

// setImage points every image line naming repo (at whatever tag) at
// ref; a manifest naming repo nowhere is an error.
func setImage(manifest []byte, repo, ref string) ([]byte, error) {
	re := regexp.MustCompile(`(?m)^([ \t]*(?:-[ \t]+)?image:[ \t]*)["']?` + regexp.QuoteMeta(repo) + `:[^"'\s#]+["']?`)
	if !re.Match(manifest) {
		return nil, fmt.Errorf("no image %s in it", repo)
	}
	return re.ReplaceAll(manifest, []byte("${1}"+ref)), nil
}

// addArg inserts arg as a list item before the line holding marker,
// indented as that line is; a manifest without the marker is an error.
func addArg(manifest []byte, marker, arg string) ([]byte, error) {
	re := regexp.MustCompile(`(?m)^([ \t]*)` + regexp.QuoteMeta(marker))
	m := re.FindSubmatchIndex(manifest)
	if m == nil {
		return nil, fmt.Errorf("no line %q in it", marker)
	}
	indent := string(manifest[m[2]:m[3]])
	var out []byte
	out = append(out, manifest[:m[0]]...)
	out = append(out, indent+"- "+strconv.Quote(arg)+"\n"...)
	return append(out, manifest[m[0]:]...), nil
}

// repoOf returns the repository of a module path: without its major
// version suffix.
func repoOf(module string) string {
	if i := strings.LastIndex(module, "/"); i >= 0 && regexp.MustCompile(`^v[0-9]+$`).MatchString(module[i+1:]) {
		return module[:i]
	}
	return module
}
