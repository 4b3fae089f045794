package guestbench

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/purerbd/purerbd/csi"
	"github.com/purerbd/purerbd/internal/promscrape"
)

// nodeClusterID names the cluster in the plugin's config.
const nodeClusterID = "bench"

// The node plugin's health and metrics endpoints, on the ports the
// shipped DaemonSet uses (deploy/kubernetes/node.yaml), on the guest's
// loopback. The metrics endpoint also serves Go's profiles.
const (
	nodeHealthAddr  = "127.0.0.1:9809"
	nodeMetricsAddr = "127.0.0.1:9810"
)

// ProfileNodeHeap names the node plugin's heap profile, taken after the
// writes through its volumes, among the guest's PROFILE lines.
const ProfileNodeHeap = "node-heap"

// nodePlugin runs the shipped `purerbd-csi --node` and plays the CO: it
// stages the node images one by one as ext4 volumes (NodeStageVolume:
// open the image, attach /dev/nbdN, mkfs, mount), reading the plugin's
// memory after the first and after the last, writes a file through each
// mount, reads the memory again, and unstages them all, timing every
// call. The plugin runs with the shipped DaemonSet's health and metrics
// endpoints; each memory reading takes the Go runtime's account from the
// metrics, and the heap profile after the writes is printed
// (ProfileNodeHeap).
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
		"--health-addr", nodeHealthAddr, "--metrics-address", nodeMetricsAddr, "--enable-profiling", "--log-level", "warn")
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
		m := NodeMem{Step: step, Attached: attached, RSS: rss, HWM: hwm}
		if err := goMemory(ctx, &m); err != nil {
			note("node plugin: %s: Go memory from its metrics: %v", step, err)
		}
		rec.Memory = append(rec.Memory, m)
		fmt.Printf("  node plugin: %s: VmRSS %d KiB, VmHWM %d KiB, Go heap in use %d KiB, kept %d KiB, stacks %d KiB\n",
			step, rss>>10, hwm>>10, m.HeapInuse>>10, m.HeapKept>>10, m.Stacks>>10)
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
	if err := printHeapProfile(ctx); err != nil {
		note("node plugin: heap profile: %v", err)
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

// goMemory fills m's Go runtime figures from the plugin's metrics.
func goMemory(ctx context.Context, m *NodeMem) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	fams, err := promscrape.Scrape(ctx, "http://"+nodeMetricsAddr+"/metrics")
	if err != nil {
		return err
	}
	v := map[string]int64{}
	for _, name := range []string{"go_memstats_heap_inuse_bytes", "go_memstats_heap_idle_bytes",
		"go_memstats_heap_released_bytes", "go_memstats_stack_inuse_bytes"} {
		f, ok := fams.Value(name, nil)
		if !ok {
			return fmt.Errorf("no %s", name)
		}
		v[name] = int64(f)
	}
	m.HeapInuse = v["go_memstats_heap_inuse_bytes"]
	m.HeapKept = v["go_memstats_heap_idle_bytes"] - v["go_memstats_heap_released_bytes"]
	m.Stacks = v["go_memstats_stack_inuse_bytes"]
	return nil
}

// printHeapProfile prints the plugin's heap profile as it is (no
// collection first) as PROFILE lines.
func printHeapProfile(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+nodeMetricsAddr+"/debug/pprof/heap", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET heap profile: %s: %.200s", resp.Status, b)
	}
	printProfile(ProfileNodeHeap, b)
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
