package e2e_test

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/scrypt"

	"github.com/purerbd/purerbd/deploy/e2e"
)

func init() {
	scenarios = append(scenarios, scenario{"encrypted", encryptedVolume}, scenario{"encrypted-kms", encryptedKMSVolume})
}

// encryptedVolume: a class with encrypted: "true" and a node-stage
// secret holding encryptionPassphrase, as ceph-csi's users write them. A
// pod writes the records on ext4 and another reads them back; the image
// carries a LUKS2 header and no plaintext (rbd export); librbd's own LUKS
// layer (qemu-img with encrypt.format=luks2 and the secret's passphrase)
// decrypts a file system that e2fsck finds clean, holding the records the
// pod read; the volume goes with its claim.
func encryptedVolume(ctx context.Context, t *testing.T, c *e2e.Cluster) string {
	const pass = "a passphrase only the node-stage secret knows"
	must(t, c.Apply(ctx, fmt.Sprintf(`apiVersion: v1
kind: Secret
metadata:
  name: purerbd-csi-secret-encrypted
  namespace: purerbd
stringData:
  userID: %s
  userKey: %q
  encryptionPassphrase: %q
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: purerbd-encrypted
provisioner: rbd.purerbd.io
parameters:
  clusterID: %s
  pool: %s
  imageFeatures: layering,exclusive-lock,object-map,fast-diff,deep-flatten
  encrypted: "true"
  csi.storage.k8s.io/fstype: ext4
  csi.storage.k8s.io/provisioner-secret-name: purerbd-csi-secret
  csi.storage.k8s.io/provisioner-secret-namespace: purerbd
  csi.storage.k8s.io/controller-expand-secret-name: purerbd-csi-secret
  csi.storage.k8s.io/controller-expand-secret-namespace: purerbd
  csi.storage.k8s.io/node-stage-secret-name: purerbd-csi-secret-encrypted
  csi.storage.k8s.io/node-stage-secret-namespace: purerbd
reclaimPolicy: Delete
volumeBindingMode: Immediate
`, c.CephUser, c.CephKey, pass, c.ClusterID, c.Pool)))
	const name = "enc-1"
	image, _ := claimImage(ctx, t, c, name, "purerbd-encrypted")
	spec := c.Pool + "/" + image
	if m := imageMeta(ctx, t, c, image, "rbd.csi.ceph.com/encrypted"); m != "encryptionPrepared" {
		t.Fatalf("a new encrypted volume's mark is %q, want encryptionPrepared", m)
	}
	ts := time.Now()
	podSum := writeAndHashRecords(ctx, t, c, name, 31)
	pods := time.Since(ts)
	if m := imageMeta(ctx, t, c, image, "rbd.csi.ceph.com/encrypted"); m != "encrypted" {
		t.Fatalf("after the first stage the mark is %q, want encrypted", m)
	}

	// The image as stored: a LUKS2 header, and none of the records.
	dir := t.TempDir()
	raw := filepath.Join(dir, "raw")
	_, err := c.Ceph.Rbd(ctx, "export", "--no-progress", spec, raw)
	must(t, err)
	rb, err := os.ReadFile(raw)
	must(t, err)
	if !bytes.HasPrefix(rb, []byte("LUKS\xba\xbe\x00\x02")) {
		t.Fatalf("the image does not start with a LUKS2 header: % x", rb[:8])
	}

	// The plaintext as librbd decrypts it with the secret's passphrase.
	plain := librbdPlaintext(ctx, t, c, dir, image, []byte(pass))
	hostSum := fileSum(t, "ext4", plain, "/data/records")
	if hostSum != podSum {
		t.Fatalf("librbd's plaintext holds records hashing %s, the pod read %s", hostSum, podSum)
	}
	// A chunk of the records, as the file system holds them, must not be
	// in the stored image.
	recs, err := exec.Command("debugfs", "-R", "cat /records", plain).Output()
	must(t, err)
	if len(recs) < recCount*recSize {
		t.Fatalf("debugfs read %d bytes of the records from librbd's plaintext", len(recs))
	}
	if chunk := recs[recSize+100 : recSize+100+4096]; bytes.Contains(rb, chunk) {
		t.Fatal("a record's bytes are in the image as stored: not encrypted")
	}

	must(t, c.Delete(ctx, "pvc/"+name))
	must(t, waitImageGone(ctx, c, image, 3*time.Minute))
	must(t, c.Delete(ctx, "storageclass/purerbd-encrypted"))
	must(t, c.Delete(ctx, "-n", "purerbd", "secret/purerbd-csi-secret-encrypted"))
	return fmt.Sprintf("formatted and written by one pod, read back by another in %v; LUKS2 header and no record in rbd export; librbd (qemu-img, encrypt.format=luks2) decrypts a clean ext4 with the same records (sha256 %s…); image removed",
		pods.Round(time.Millisecond), hostSum[:12])
}

// encryptedKMSVolume: a class naming the example KMS section
// "volume-secret" (ceph-csi's metadata type, the passphrase in the Secret
// volume-encryption): the controller reads that Secret through the API
// and seals a key of the volume's own in its image; the node, given get
// on that one Secret as an operator would grant it, opens the key and
// formats with it; the records go through; librbd decrypts them with the
// key, opened from the image's metadata as ceph-csi opens it.
func encryptedKMSVolume(ctx context.Context, t *testing.T, c *e2e.Cluster) string {
	const kmsPass = "the tenant's KMS passphrase"
	must(t, c.Apply(ctx, fmt.Sprintf(`apiVersion: v1
kind: Secret
metadata:
  name: volume-encryption
  namespace: purerbd
stringData:
  encryptionPassphrase: %q
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: purerbd-csi-node-kms
  namespace: purerbd
rules:
  - apiGroups: [""]
    resources: ["secrets"]
    resourceNames: ["volume-encryption"]
    verbs: ["get"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: purerbd-csi-node-kms
  namespace: purerbd
subjects:
  - kind: ServiceAccount
    name: purerbd-csi-node
    namespace: purerbd
roleRef:
  kind: Role
  name: purerbd-csi-node-kms
  apiGroup: rbac.authorization.k8s.io
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: purerbd-encrypted-kms
provisioner: rbd.purerbd.io
parameters:
  clusterID: %s
  pool: %s
  encrypted: "true"
  encryptionKMSID: volume-secret
  csi.storage.k8s.io/fstype: ext4
  csi.storage.k8s.io/provisioner-secret-name: purerbd-csi-secret
  csi.storage.k8s.io/provisioner-secret-namespace: purerbd
  csi.storage.k8s.io/node-stage-secret-name: purerbd-csi-secret
  csi.storage.k8s.io/node-stage-secret-namespace: purerbd
reclaimPolicy: Delete
volumeBindingMode: Immediate
`, kmsPass, c.ClusterID, c.Pool)))
	const name = "enc-kms"
	image, volumeID := claimImage(ctx, t, c, name, "purerbd-encrypted-kms")
	if k := imageMeta(ctx, t, c, image, "purerbd.csi.encryptionKMSID"); k != "volume-secret" {
		t.Fatalf("the image records KMS %q", k)
	}
	podSum := writeAndHashRecords(ctx, t, c, name, 37)

	// The volume's key, opened as ceph-csi's metadata KMS opens it.
	var sealed struct{ DEK, Nonce []byte }
	must(t, json.Unmarshal([]byte(imageMeta(ctx, t, c, image, "rbd.csi.ceph.com/dek")), &sealed))
	key, err := scrypt.Key([]byte(kmsPass), []byte(volumeID), 32768, 8, 1, 32)
	must(t, err)
	block, err := aes.NewCipher(key)
	must(t, err)
	gcm, err := cipher.NewGCM(block)
	must(t, err)
	dek, err := gcm.Open(nil, sealed.Nonce, sealed.DEK, nil)
	must(t, err)
	plain := librbdPlaintext(ctx, t, c, t.TempDir(), image, dek)
	if hostSum := fileSum(t, "ext4", plain, "/data/records"); hostSum != podSum {
		t.Fatalf("librbd's plaintext holds records hashing %s, the pod read %s", hostSum, podSum)
	}

	must(t, c.Delete(ctx, "pvc/"+name))
	must(t, waitImageGone(ctx, c, image, 3*time.Minute))
	must(t, c.Delete(ctx, "storageclass/purerbd-encrypted-kms"))
	must(t, c.Delete(ctx, "-n", "purerbd", "secret/volume-encryption", "rolebinding/purerbd-csi-node-kms", "role/purerbd-csi-node-kms"))
	return "the key sealed in the image with the Secret's passphrase (read by the controller and, granted get on that Secret, the node); records written and read back; librbd decrypts them with the key opened as ceph-csi opens it"
}

// claimImage applies a claim of class and returns its bound volume's
// image and volume handle.
func claimImage(ctx context.Context, t *testing.T, c *e2e.Cluster, name, class string) (image, handle string) {
	t.Helper()
	must(t, c.Apply(ctx, e2e.PVC{Name: name, Size: "256Mi", StorageClass: class}.Manifest()))
	pv, err := c.WaitPVCBound(ctx, name, 3*time.Minute)
	must(t, err)
	image, err = c.ImageOf(ctx, pv)
	must(t, err)
	out, err := c.Kubectl(ctx, "get", "pv", pv, "-o", "jsonpath={.spec.csi.volumeHandle}")
	must(t, err)
	return image, strings.TrimSpace(string(out))
}

// imageMeta reads one metadata value of an image with Ceph's rbd.
func imageMeta(ctx context.Context, t *testing.T, c *e2e.Cluster, image, key string) string {
	t.Helper()
	out, err := c.Ceph.Rbd(ctx, "image-meta", "get", c.Pool+"/"+image, key)
	must(t, err)
	return strings.TrimSpace(string(out))
}

// writeAndHashRecords writes the records on claim with one pod and
// returns the hash another pod reads back.
func writeAndHashRecords(ctx context.Context, t *testing.T, c *e2e.Cluster, claim string, seed int) string {
	t.Helper()
	writeRecords(ctx, t, c, claim+"-w", claim, seed)
	out, err := c.RunPod(ctx, e2e.Pod{Name: claim + "-r", Claim: claim, Command: []string{"/bin/sh", "-c",
		fmt.Sprintf("/bin/workload verify --path /data/records --count %d --size %d --seed %d && head -c %d /data/records | sha256sum",
			recCount, recSize, seed, recCount*recSize)}}, 5*time.Minute)
	must(t, err)
	must(t, c.Delete(ctx, "pod/"+claim+"-r"))
	return lastField(out)
}

// librbdPlaintext reads an encrypted image's plaintext through librbd's
// LUKS layer (qemu-img dd, encrypt.format=luks2) into a file of dir.
func librbdPlaintext(ctx context.Context, t *testing.T, c *e2e.Cluster, dir, image string, passphrase []byte) string {
	t.Helper()
	passFile := filepath.Join(dir, "pass")
	must(t, os.WriteFile(passFile, passphrase, 0o600))
	plain := filepath.Join(dir, "plain")
	opts := fmt.Sprintf("driver=rbd,pool=%s,image=%s,conf=%s,encrypt.format=luks2,encrypt.key-secret=sec0", c.Pool, image, c.Ceph.Conf)
	if out, err := c.Ceph.Program(ctx, "qemu-img", "dd", "--object", "secret,id=sec0,file="+passFile, "--image-opts", "-O", "raw",
		"bs=1M", "if="+opts, "of="+plain); err != nil {
		t.Fatalf("qemu-img dd through librbd's LUKS layer: %v\n%s", err, out)
	}
	return plain
}
