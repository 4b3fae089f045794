package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"time"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// ControlPlane is the timing of the CSI controller's calls.
type ControlPlane struct {
	Runs     int
	Calls    []CallTiming
	CPU      float64 // controller process CPU seconds over all runs
	RSS      int64   // its peak RSS
	Skipped  string
	Failures []string
	Elapsed  time.Duration
}

// CallTiming is the latency distribution of one CSI call.
type CallTiming struct {
	Call  string
	Times []time.Duration // successful calls only
}

func (c CallTiming) percentile(p float64) time.Duration {
	if len(c.Times) == 0 {
		return 0
	}
	t := append([]time.Duration(nil), c.Times...)
	sort.Slice(t, func(i, j int) bool { return t[i] < t[j] })
	i := int(math.Ceil(p/100*float64(len(t)))) - 1
	return t[max(0, min(i, len(t)-1))]
}

// controlPlane starts `purerbd-csi --controller` against the cluster and
// times, over many runs, the life cycle of a volume: CreateVolume,
// CreateSnapshot, CreateVolume from the snapshot (a clone),
// DeleteVolume of the clone, DeleteSnapshot, DeleteVolume.
func (s *suite) controlPlane(ctx context.Context, c *cluster) *ControlPlane {
	cp := &ControlPlane{Runs: pick(s.cfg, 50, 5)}
	bin, ok := s.bins["purerbd-csi"]
	if !ok {
		cp.Skipped = "no purerbd-csi binary"
		return cp
	}
	dir := filepath.Join(s.work, "csi")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		cp.Skipped = err.Error()
		return cp
	}
	cfgPath := filepath.Join(dir, "config.json")
	cfg, _ := json.Marshal([]map[string]any{{"clusterID": "bench", "monitors": c.MonAddrs}})
	if err := os.WriteFile(cfgPath, cfg, 0o600); err != nil {
		cp.Skipped = err.Error()
		return cp
	}
	sock := filepath.Join(dir, "csi.sock")
	d, err := startServer(ctx, filepath.Join(dir, "purerbd-csi.log"), sock, bin.Path, "--controller", "--endpoint",
		"unix://"+sock, "--cluster-config", cfgPath, "--sweep-interval", "0", "--log-level", "warn")
	if err == nil {
		defer d.stop()
	} else {
		cp.Skipped = "purerbd-csi did not start: " + err.Error()
		return cp
	}
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		cp.Skipped = err.Error()
		return cp
	}
	defer conn.Close()
	ctl := csipb.NewControllerClient(conn)
	secrets := map[string]string{"userID": "admin", "userKey": c.AdminKey}
	params := map[string]string{"clusterID": "bench", "pool": "rbd",
		"imageFeatures": "layering,exclusive-lock,object-map,fast-diff,deep-flatten"}
	caps := []*csipb.VolumeCapability{{
		AccessType: &csipb.VolumeCapability_Mount{Mount: &csipb.VolumeCapability_MountVolume{FsType: "ext4"}},
		AccessMode: &csipb.VolumeCapability_AccessMode{Mode: csipb.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
	}}
	names := []string{"CreateVolume", "CreateSnapshot", "CreateVolume (clone from snapshot)", "DeleteVolume (clone)",
		"DeleteSnapshot", "DeleteVolume"}
	timings := make([]CallTiming, len(names))
	for i, n := range names {
		timings[i].Call = n
	}
	timed := func(i int, f func(ctx context.Context) error) error {
		ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		t0 := time.Now()
		err := f(ctx)
		if err != nil {
			return fmt.Errorf("%s: %w", names[i], err)
		}
		timings[i].Times = append(timings[i].Times, time.Since(t0))
		return nil
	}
	before, _ := d.usage()
	t0 := time.Now()
	for run := 0; run < cp.Runs && ctx.Err() == nil; run++ {
		var volID, snapID, cloneID string
		err := timed(0, func(ctx context.Context) error {
			r, err := ctl.CreateVolume(ctx, &csipb.CreateVolumeRequest{Name: fmt.Sprintf("bench-vol-%d", run),
				CapacityRange: &csipb.CapacityRange{RequiredBytes: 1 << 30}, VolumeCapabilities: caps,
				Parameters: params, Secrets: secrets})
			if err == nil {
				volID = r.GetVolume().GetVolumeId()
			}
			return err
		})
		if err == nil {
			err = timed(1, func(ctx context.Context) error {
				r, err := ctl.CreateSnapshot(ctx, &csipb.CreateSnapshotRequest{SourceVolumeId: volID,
					Name: fmt.Sprintf("bench-snap-%d", run), Secrets: secrets, Parameters: map[string]string{"clusterID": "bench"}})
				if err == nil {
					snapID = r.GetSnapshot().GetSnapshotId()
				}
				return err
			})
		}
		if err == nil {
			err = timed(2, func(ctx context.Context) error {
				r, err := ctl.CreateVolume(ctx, &csipb.CreateVolumeRequest{Name: fmt.Sprintf("bench-clone-%d", run),
					CapacityRange: &csipb.CapacityRange{RequiredBytes: 1 << 30}, VolumeCapabilities: caps,
					Parameters: params, Secrets: secrets,
					VolumeContentSource: &csipb.VolumeContentSource{Type: &csipb.VolumeContentSource_Snapshot{
						Snapshot: &csipb.VolumeContentSource_SnapshotSource{SnapshotId: snapID}}}})
				if err == nil {
					cloneID = r.GetVolume().GetVolumeId()
				}
				return err
			})
		}
		// clean up whatever was made, timing the deletions
		if cloneID != "" {
			err = errors.Join(err, timed(3, func(ctx context.Context) error {
				_, err := ctl.DeleteVolume(ctx, &csipb.DeleteVolumeRequest{VolumeId: cloneID, Secrets: secrets})
				return err
			}))
		}
		if snapID != "" {
			err = errors.Join(err, timed(4, func(ctx context.Context) error {
				_, err := ctl.DeleteSnapshot(ctx, &csipb.DeleteSnapshotRequest{SnapshotId: snapID, Secrets: secrets})
				return err
			}))
		}
		if volID != "" {
			err = errors.Join(err, timed(5, func(ctx context.Context) error {
				_, err := ctl.DeleteVolume(ctx, &csipb.DeleteVolumeRequest{VolumeId: volID, Secrets: secrets})
				return err
			}))
		}
		if err != nil {
			s.log.Warn("bench: CSI run failed", "run", run, "err", err)
			cp.Failures = append(cp.Failures, fmt.Sprintf("run %d: %v", run, err))
			if len(cp.Failures) >= 3 && run < 3 {
				break // broken, not flaky: stop early
			}
		}
	}
	cp.Elapsed = time.Since(t0)
	after, _ := d.usage()
	cp.CPU, cp.RSS = after.CPU-before.CPU, after.RSS
	cp.Calls = timings
	return cp
}

// write prints the control-plane table.
func (cp *ControlPlane) write(b *bytes.Buffer) {
	b.WriteString("## CSI control plane\n\n")
	fmt.Fprintf(b, "`purerbd-csi --controller` (the shipped binary) on the memstore cluster, called over its Unix socket "+
		"by a gRPC client in the suite, %d runs of: CreateVolume (1 GiB, ext4, features layering, exclusive-lock, "+
		"object-map, fast-diff, deep-flatten), CreateSnapshot, CreateVolume from that snapshot (a clone), then "+
		"DeleteVolume of the clone, DeleteSnapshot, DeleteVolume. No peer: ceph-csi (with go-ceph and librbd) "+
		"cannot be installed on this machine, so these are absolute figures. The node side (NodeStageVolume and "+
		"NodeUnstageVolume times, the node plugin's RSS) is measured in the VM: see the kernel-path section.\n\n", cp.Runs)
	if cp.Skipped != "" {
		fmt.Fprintf(b, "**Skipped:** %s\n\n", cp.Skipped)
		return
	}
	b.WriteString("p99 is the nearest rank (with 50 runs, the slowest).\n\n" +
		"| call | runs | median ms | p99 ms | min ms | max ms |\n|---|---|---|---|---|---|\n")
	ms := func(d time.Duration) string { return num(float64(d) / 1e6) }
	var calls int
	for _, c := range cp.Calls {
		calls += len(c.Times)
		if len(c.Times) == 0 {
			fmt.Fprintf(b, "| %s | 0 | – | – | – | – |\n", c.Call)
			continue
		}
		fmt.Fprintf(b, "| %s | %d | %s | %s | %s | %s |\n", c.Call, len(c.Times), ms(c.percentile(50)),
			ms(c.percentile(99)), ms(c.percentile(0)), ms(c.percentile(100)))
	}
	if calls > 0 {
		fmt.Fprintf(b, "\nController process: %s CPU per call, peak RSS %s; %s in all.\n",
			num(cp.CPU/float64(calls)*1e3)+" ms", bytesCell(cp.RSS), cp.Elapsed.Round(time.Second))
	}
	if len(cp.Failures) > 0 {
		b.WriteString("\nFailed runs:\n\n")
		for _, f := range cp.Failures[:min(len(cp.Failures), 5)] {
			fmt.Fprintf(b, "- %s\n", f)
		}
	}
	b.WriteString("\n")
}
