package csi_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/purerbd/purerbd/csi"
	"github.com/purerbd/purerbd/csi/internal/cephcsifixture"
	"github.com/purerbd/purerbd/nbd/kernel/vmtest"
	"github.com/purerbd/purerbd/rados/radostest/cephcluster"
)

// cephCSIVolume is a volume laid out on the cluster as ceph-csi leaves
// one that its node has used: the journal entry (cephcsifixture), the
// image with the features Rook's default class asks for, and in it an
// ext4 file system holding one file.
type cephCSIVolume struct {
	handle, uuid, image string
	file, sum           string
	// journal is the omap of the directory and entry objects before the
	// guest ran, as `rados listomapvals` prints them.
	journal map[string]string
}

// layOutCephCSIVolume makes a 64 MiB ceph-csi volume of clusterID's pool
// (poolID), its file system built on the host (mkfs.ext4 -d) and
// imported with rbd import.
func layOutCephCSIVolume(ctx context.Context, t *testing.T, cluster *cephcluster.Cluster, clusterID string, poolID int64) cephCSIVolume {
	t.Helper()
	j := cephcsifixture.Journal{Rados: cluster.Rados, Rbd: cluster.Rbd, Pool: cluster.Pool}
	uuid, image, err := j.Reserve(ctx, "pvc-cephcsi", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	content := make([]byte, 1<<20)
	rand.Read(content)
	root := filepath.Join(dir, "root")
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "from-ceph-csi"), content, 0o644); err != nil {
		t.Fatal(err)
	}
	fs := filepath.Join(dir, "fs.img")
	if err := os.WriteFile(fs, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(fs, 64<<20); err != nil {
		t.Fatal(err)
	}
	// ceph-csi's options for ext4 (internal/rbd/nodeserver.go).
	if b, err := exec.CommandContext(ctx, "/sbin/mkfs.ext4", "-q", "-F", "-m0", "-Enodiscard,lazy_itable_init=1,lazy_journal_init=1", "-d", root, fs).CombinedOutput(); err != nil {
		t.Fatalf("mkfs.ext4 -d: %v: %s", err, b)
	}
	if out, err := cluster.Rbd(ctx, "import", "--no-progress", "--image-feature", "layering,exclusive-lock,object-map,fast-diff,deep-flatten",
		fs, cluster.Pool+"/"+image); err != nil {
		t.Fatalf("rbd import: %v: %s", err, out)
	}
	if err := j.StoreImageID(ctx, "csi.volume."+uuid, image); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(content)
	v := cephCSIVolume{
		handle: csi.CephCSIID{ClusterID: clusterID, Pool: poolID, UUID: uuid}.String(),
		uuid:   uuid, image: image, file: "from-ceph-csi", sum: hex.EncodeToString(sum[:]),
		journal: map[string]string{},
	}
	for _, obj := range []string{"csi.volumes.default", "csi.volume." + uuid} {
		if v.journal[obj], err = j.Omap(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	return v
}

// guestArgs are the flags of nodeguest's TestCephCSIVolumeGuest.
func (v cephCSIVolume) guestArgs() string {
	return fmt.Sprintf("-cephcsi-volume %s -cephcsi-image %s -cephcsi-file %s:%s", v.handle, v.image, v.file, v.sum)
}

// check checks the volume after the guest's test, as ceph-csi would find
// it if it took the volume back: grown to 128 MiB, no snapshot left,
// the file system clean with ceph-csi's file and the guest's in it (rbd
// export, e2fsck, debugfs), and the journal exactly as it was.
func (v cephCSIVolume) check(ctx context.Context, t *testing.T, cluster *cephcluster.Cluster, res *vmtest.Result) {
	t.Helper()
	spec := cluster.Pool + "/" + v.image
	if out, err := cluster.Rbd(ctx, "snap", "ls", "--all", spec); err != nil || strings.TrimSpace(string(out)) != "" {
		t.Errorf("snapshots left on the ceph-csi image (%v): %s", err, out)
	}
	exported := filepath.Join(t.TempDir(), v.image+".img")
	if out, err := cluster.Rbd(ctx, "export", "--no-progress", spec, exported); err != nil {
		t.Fatalf("rbd export: %v: %s", err, out)
	}
	if st, err := os.Stat(exported); err != nil || st.Size() != 128<<20 {
		t.Errorf("the ceph-csi image's export: %v, want 128 MiB (grown in the guest)", st)
	}
	if b, err := exec.CommandContext(ctx, "e2fsck", "-fn", exported).CombinedOutput(); err != nil {
		t.Fatalf("e2fsck -fn on the ceph-csi image: %v\n%s", err, b)
	}
	files := map[string]string{v.file: v.sum}
	for _, l := range res.Lines("CEPHCSI-FILE ") {
		if f := strings.Fields(l); len(f) == 3 {
			files[f[0]] = f[1]
		}
	}
	if len(files) != 2 {
		t.Fatalf("the guest reported %q", res.Lines("CEPHCSI-FILE "))
	}
	for name, want := range files {
		cmd := exec.CommandContext(ctx, "debugfs", "-R", "cat /"+name, exported)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("debugfs cat /%s: %v: %s", name, err, stderr.String())
		}
		if sum := sha256.Sum256(stdout.Bytes()); hex.EncodeToString(sum[:]) != want {
			t.Errorf("/%s in the ceph-csi image's export: sha256 %x, want %s", name, sum[:8], want[:16])
		}
	}
	j := cephcsifixture.Journal{Rados: cluster.Rados, Rbd: cluster.Rbd, Pool: cluster.Pool}
	for obj, before := range v.journal {
		after, err := j.Omap(ctx, obj)
		if err != nil {
			t.Fatal(err)
		}
		if after != before {
			t.Errorf("the journal object %s changed:\nbefore:\n%s\nafter:\n%s", obj, before, after)
		}
	}
	t.Logf("ceph-csi volume %s: grown to 128 MiB, e2fsck clean, ceph-csi's file and the guest's intact, journal unchanged", v.image)
}
