package main

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"

	"github.com/purerbd/purerbd/nbd/kernel/vmtest/guestio"
)

// rwoBlock is a raw block volume for one writer.
var rwoBlock = &csipb.VolumeCapability{
	AccessType: &csipb.VolumeCapability_Block{Block: &csipb.VolumeCapability_BlockVolume{}},
	AccessMode: &csipb.VolumeCapability_AccessMode{Mode: csipb.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
}

// rbdBlock is the raw block volume of the rbd scenario: a writer of its
// own (synced chunks from offset 0, on the device itself) runs across
// the plugin's SIGKILL and restart; after it, what it wrote reads back
// (O_DIRECT, from the image through the restarted plugin), the rest of
// the first blockBytes is written, and the whole (blockBytes, or what
// the writer wrote if more) is reported as "BLOCK <sha256> <bytes>" for
// the host's `rbd export`.
type rbdBlock struct {
	vol, image string
	writer     heldWriter
	res        guestio.Result
}

const blockBytes = 8 * mib

func (r *rbdScenario) blockReq() *csipb.NodeStageVolumeRequest {
	return &csipb.NodeStageVolumeRequest{
		VolumeId: r.block.vol, StagingTargetPath: bStaging, VolumeCapability: rwoBlock, Secrets: r.secrets,
		VolumeContext: map[string]string{"clusterID": clusterID, "pool": r.pool, "imageName": r.block.image},
	}
}

// stageBlock stages and publishes the block volume and starts its
// writer.
func (r *rbdScenario) stageBlock(ctx context.Context) error {
	for _, d := range []string{bStaging, filepath.Dir(bTarget)} {
		if err := os.MkdirAll(d, 0o750); err != nil {
			return err
		}
	}
	if _, err := r.p.node.NodeStageVolume(ctx, r.blockReq()); err != nil {
		return err
	}
	if err := r.publishBlock(ctx); err != nil {
		return err
	}
	r.block.writer.w = startStreamWriter(bTarget)
	if !r.block.writer.w.WaitProgress(4, 60*time.Second) {
		return errors.New("the block writer does not progress")
	}
	return nil
}

func (r *rbdScenario) publishBlock(ctx context.Context) error {
	_, err := r.p.node.NodePublishVolume(ctx, &csipb.NodePublishVolumeRequest{
		VolumeId: r.block.vol, StagingTargetPath: bStaging, TargetPath: bTarget, VolumeCapability: rwoBlock, Secrets: r.secrets,
	})
	return err
}

// blockResumed waits for the writer to resume after the restart,
// reports its stall, lets it write some more and stops it.
func (r *rbdScenario) blockResumed(killed time.Time) error {
	var err error
	r.block.res, err = r.block.writer.finish("block", killed, r.Timings, r.Facts,
		"restart: block I/O stall (last write synced before SIGKILL to first after)", "block_writer_bytes_across_kill")
	return err
}

// checkBlock runs after the restart: what the writer wrote reads back
// through the new plugin, the rest of the first blockBytes (if any) is
// written, and the whole is reported.
func (r *rbdScenario) checkBlock(ctx context.Context) error {
	if _, err := r.p.node.NodeStageVolume(ctx, r.blockReq()); err != nil {
		return fmt.Errorf("stage again: %w", err)
	}
	if err := r.publishBlock(ctx); err != nil {
		return fmt.Errorf("publish again: %w", err)
	}
	n := int(r.block.res.Bytes)
	back, err := directRead(bTarget, n, 0)
	if err != nil {
		return err
	}
	if sum := sha256.Sum256(back); hex.EncodeToString(sum[:]) != r.block.res.Sum {
		return errors.New("the block volume reads other bytes after the restart than the writer wrote")
	}
	// The writer's chunks are 128 KiB: the rest starts aligned.
	if rest := make([]byte, max(blockBytes-n, 0)); len(rest) > 0 {
		rand.Read(rest)
		if err := guestio.DirectIO(bTarget, rest, int64(n)); err != nil {
			return err
		}
		back = append(back, rest...)
	}
	sum := sha256.Sum256(back)
	fmt.Printf("BLOCK %s %d\n", hex.EncodeToString(sum[:]), len(back))
	return r.healthy(ctx, r.block.vol)
}

// unstageBlock unpublishes and unstages the block volume (checkFree
// after it, once no volume is left, checks the device and state went).
func (r *rbdScenario) unstageBlock(ctx context.Context) error {
	if _, err := r.p.node.NodeUnpublishVolume(ctx, &csipb.NodeUnpublishVolumeRequest{VolumeId: r.block.vol, TargetPath: bTarget}); err != nil {
		return err
	}
	if _, err := r.p.node.NodeUnstageVolume(ctx, &csipb.NodeUnstageVolumeRequest{VolumeId: r.block.vol, StagingTargetPath: bStaging}); err != nil {
		return err
	}
	return nil
}

// directRead reads n bytes at off with O_DIRECT: from the device's
// server, not the page cache.
func directRead(path string, n int, off int64) ([]byte, error) {
	buf, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		return nil, err
	}
	defer unix.Munmap(buf)
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_DIRECT, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if _, err := f.ReadAt(buf, off); err != nil {
		return nil, err
	}
	return append([]byte(nil), buf...), nil
}

// kernelLog returns the kernel log's lines.
func kernelLog() []string {
	return strings.Split(guestio.DmesgTail(1<<20), "\n")
}

// reconnects returns the kernel log lines about /dev/nbd<idx> (the dead
// connection, "reconnected socket"), and whether a reconnection is among
// them.
func reconnects(idx int) ([]string, bool) {
	var out []string
	found := false
	dev := fmt.Sprintf("nbd%d", idx)
	for _, l := range kernelLog() {
		if !strings.Contains(l, dev+":") && !strings.Contains(l, dev+" ") {
			continue
		}
		out = append(out, l)
		if strings.Contains(strings.ToLower(l), "reconnect") {
			found = true
		}
	}
	return out, found
}
