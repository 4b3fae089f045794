// Package cephcsifixture lays out volumes and snapshots as ceph-csi's RBD
// driver leaves them on a real cluster, journal and images, with Ceph's
// own rados and rbd tools, for the tests that adopt them.
//
// The journal is written key by key as ceph-csi writes it (ceph/ceph-csi
// internal/journal/voljournal.go: reserveOMapName creates the per-entry
// object, ReserveName sets the directory key and then the entry's keys,
// StoreImageID adds csi.imageid once the image exists). The journal pool
// is the image pool, so neither csi.journalpool nor a pool prefix on the
// directory value is written.
package cephcsifixture

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
)

// Tool runs one of Ceph's command-line tools against the cluster and
// returns its standard output.
type Tool func(ctx context.Context, args ...string) ([]byte, error)

// Journal writes ceph-csi's journal (instance ID "default") in one pool.
type Journal struct {
	Rados, Rbd Tool
	Pool       string
}

// NewUUID returns a random version 4 UUID, as ceph-csi makes for each
// entry.
func NewUUID() string {
	b := make([]byte, 16)
	rand.Read(b)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := fmt.Sprintf("%x", b)
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// Reserve writes the entry of a volume for CO name reqName (a snapshot
// when source, its source image, is set), with extra keys, and returns
// its UUID and image name. The image itself is the caller's to make.
func (j Journal) Reserve(ctx context.Context, reqName, source string, extra map[string]string) (uuid, image string, err error) {
	uuid = NewUUID()
	dir, keyPrefix, nameKey, obj, image := "csi.volumes.default", "csi.volume.", "csi.volname", "csi.volume."+uuid, "csi-vol-"+uuid
	if source != "" {
		dir, keyPrefix, nameKey, obj, image = "csi.snaps.default", "csi.snap.", "csi.snapname", "csi.snap."+uuid, "csi-snap-"+uuid
	}
	steps := [][]string{
		{"create", obj},
		{"setomapval", dir, keyPrefix + reqName, uuid},
		{"setomapval", obj, nameKey, reqName},
		{"setomapval", obj, "csi.imagename", image},
	}
	if source != "" {
		steps = append(steps, []string{"setomapval", obj, "csi.source", source})
	}
	for k, v := range extra {
		steps = append(steps, []string{"setomapval", obj, k, v})
	}
	for _, s := range steps {
		if _, err := j.Rados(ctx, append([]string{"-p", j.Pool}, s...)...); err != nil {
			return "", "", fmt.Errorf("journal of %s: rados %v: %w", reqName, s, err)
		}
	}
	return uuid, image, nil
}

// StoreImageID records the image's ID in the entry object obj as
// ceph-csi does after creating the image.
func (j Journal) StoreImageID(ctx context.Context, obj, image string) error {
	out, err := j.Rbd(ctx, "info", "--format", "json", j.Pool+"/"+image)
	if err != nil {
		return fmt.Errorf("rbd info %s: %w", image, err)
	}
	var info struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(out, &info); err != nil || info.ID == "" {
		return fmt.Errorf("rbd info %s: no image ID in %q (%v)", image, out, err)
	}
	if _, err := j.Rados(ctx, "-p", j.Pool, "setomapval", obj, "csi.imageid", info.ID); err != nil {
		return fmt.Errorf("storing the ID of %s: %w", image, err)
	}
	return nil
}

// Omap returns an object's omap as `rados listomapvals` prints it, for
// comparing the journal before and after.
func (j Journal) Omap(ctx context.Context, obj string) (string, error) {
	out, err := j.Rados(ctx, "-p", j.Pool, "listomapvals", obj)
	if err != nil {
		return "", fmt.Errorf("rados listomapvals %s: %w", obj, err)
	}
	return string(out), nil
}
