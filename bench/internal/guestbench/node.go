package guestbench

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/purerbd/purerbd/csi"
)

// nodeClusterID names the cluster in the plugin's config.
const nodeClusterID = "bench"

// nodePlugin runs the shipped `purerbd-csi --node` and plays the CO: it
// stages the node images one by one as ext4 volumes (NodeStageVolume:
// open the image, attach /dev/nbdN, mkfs, mount), reading the plugin's
// memory after the first and after the last, writes a file through each
// mount, reads the memory again, and unstages them all, timing every
// call.
func nodePlugin(ctx context.Context, o options, key string) error {
	images := strings.Split(o.nodeImages, ",")
	cfg, err := json.Marshal([]map[string]any{{"clusterID": nodeClusterID, "monitors": strings.Split(o.mon, ",")}})
	if err != nil {
		return err
	}
	if err := os.MkdirAll("/etc/purerbd", 0o755); err != nil {
		return err
	}
	if err := os.WriteFile("/etc/purerbd/config.json", cfg, 0o644); err != nil {
		return err
	}
	sock := "/run/csi/csi.sock"
	if err := os.MkdirAll(filepath.Dir(sock), 0o755); err != nil {
		return err
	}
	t0 := time.Now()
	p, err := startChild(o.purerbdCSI, "--node", "--nodeid", "vm-node", "--endpoint", "unix://"+sock,
		"--cluster-config", "/etc/purerbd/config.json", "--state-dir", "/run/purerbd-csi", "--tools-dir", "/sbin",
		"--log-level", "warn")
	if err != nil {
		return err
	}
	defer p.stop()
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	node := csipb.NewNodeClient(conn)
	for i := 0; ; i++ {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err = node.NodeGetInfo(cctx, &csipb.NodeGetInfoRequest{})
		cancel()
		if err == nil {
			break
		}
		if i > 60 {
			return fmt.Errorf("purerbd-csi --node does not answer: %w", err)
		}
		time.Sleep(500 * time.Millisecond)
	}
	rec := NodeRecord{Volumes: len(images), StartS: time.Since(t0).Seconds(), VolumeSize: o.nodeSize, FsType: "ext4"}
	mem := func(step string, attached int) error {
		rss, hwm, err := procMem(p.cmd.Process.Pid)
		if err != nil {
			return err
		}
		rec.Memory = append(rec.Memory, NodeMem{Step: step, Attached: attached, RSS: rss, HWM: hwm})
		fmt.Printf("  node plugin: %s: VmRSS %d KiB, VmHWM %d KiB\n", step, rss>>10, hwm>>10)
		return nil
	}
	if err := mem("started", 0); err != nil {
		return err
	}
	capability := &csipb.VolumeCapability{
		AccessType: &csipb.VolumeCapability_Mount{Mount: &csipb.VolumeCapability_MountVolume{FsType: "ext4"}},
		AccessMode: &csipb.VolumeCapability_AccessMode{Mode: csipb.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
	}
	secrets := map[string]string{"userID": o.user, "userKey": key}
	type vol struct{ id, staging string }
	var staged []vol
	defer func() {
		// on failure, leave nothing attached behind
		for _, v := range staged {
			_, _ = node.NodeUnstageVolume(context.Background(), &csipb.NodeUnstageVolumeRequest{VolumeId: v.id, StagingTargetPath: v.staging})
		}
	}()
	for i, img := range images {
		v := vol{id: csi.VolumeID{ClusterID: nodeClusterID, Pool: o.poolID, Image: img}.String(),
			staging: fmt.Sprintf("/run/stage/%d", i)}
		if err := os.MkdirAll(v.staging, 0o755); err != nil {
			return err
		}
		cctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
		t := time.Now()
		_, err := node.NodeStageVolume(cctx, &csipb.NodeStageVolumeRequest{
			VolumeId: v.id, StagingTargetPath: v.staging, VolumeCapability: capability, Secrets: secrets,
			VolumeContext: map[string]string{"clusterID": nodeClusterID, "pool": o.pool, "imageName": img},
		})
		cancel()
		if err != nil {
			return fmt.Errorf("NodeStageVolume %s: %w", img, err)
		}
		rec.StageS = append(rec.StageS, time.Since(t).Seconds())
		staged = append(staged, v)
		if i == 0 {
			if err := mem("1 staged", 1); err != nil {
				return err
			}
		}
	}
	if err := mem(fmt.Sprintf("%d staged", len(staged)), len(staged)); err != nil {
		return err
	}
	buf := make([]byte, 4<<20)
	_, _ = rand.Read(buf)
	for _, v := range staged {
		if err := writeSynced(filepath.Join(v.staging, "data"), buf); err != nil {
			return err
		}
	}
	if err := mem(fmt.Sprintf("%d staged, after writing 4 MiB to each", len(staged)), len(staged)); err != nil {
		return err
	}
	for len(staged) > 0 {
		v := staged[0]
		cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		t := time.Now()
		_, err := node.NodeUnstageVolume(cctx, &csipb.NodeUnstageVolumeRequest{VolumeId: v.id, StagingTargetPath: v.staging})
		cancel()
		if err != nil {
			return fmt.Errorf("NodeUnstageVolume %s: %w", v.id, err)
		}
		rec.UnstageS = append(rec.UnstageS, time.Since(t).Seconds())
		staged = staged[1:]
	}
	if err := mem("all unstaged", 0); err != nil {
		return err
	}
	emit(PrefixNode, rec)
	return nil
}

// writeSynced writes b to a new file and fsyncs it.
func writeSynced(path string, b []byte) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
