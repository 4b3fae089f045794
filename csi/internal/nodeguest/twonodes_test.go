package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/purerbd/purerbd/nbd/kernel/vmtest/guestio"
)

// TestTwoNodesGuest runs two purerbd-csi node plugins side by side, as
// two nodes of a cluster would be (node IDs node-a and node-b, each its
// own state directory and socket): while node-a has a single-writer
// volume staged, node-b's NodeStage fails with FAILED_PRECONDITION
// naming node-a, and node-a's volume keeps working; once node-a
// unstages, node-b stages it and reads what node-a wrote, and now
// node-a is refused.
func TestTwoNodesGuest(t *testing.T) {
	g := needGuest(t)
	if g == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	a := startBinary(t, "node-a", "--controller", "--node", "--nodeid", "node-a", "--state-dir", "/run/purerbd-node-a")
	b := startBinary(t, "node-b", "--node", "--nodeid", "node-b", "--state-dir", "/run/purerbd-node-b")
	c := mountVolume("ext4", csipb.VolumeCapability_AccessMode_SINGLE_NODE_WRITER)

	var vol *csipb.Volume
	timed(t, "CreateVolume on node-a's controller", func() error {
		r, err := a.ctrl.CreateVolume(ctx, &csipb.CreateVolumeRequest{
			Name: "pvc-two-nodes", CapacityRange: &csipb.CapacityRange{RequiredBytes: 32 * mib},
			VolumeCapabilities: []*csipb.VolumeCapability{c}, Parameters: g.params(), Secrets: g.secrets,
		})
		vol = r.GetVolume()
		return err
	})
	id := vol.GetVolumeId()
	paths := map[*binaryPlugin][2]string{}
	for _, p := range []*binaryPlugin{a, b} {
		base := filepath.Join("/var/lib/kubelet", p.name)
		paths[p] = [2]string{filepath.Join(base, "globalmount"), filepath.Join(base, "pods/p/mount")}
		if err := os.MkdirAll(paths[p][0], 0o750); err != nil {
			t.Fatal(err)
		}
	}
	stage := func(p *binaryPlugin) error {
		_, err := p.node.NodeStageVolume(ctx, &csipb.NodeStageVolumeRequest{
			VolumeId: id, StagingTargetPath: paths[p][0], VolumeCapability: c, Secrets: g.secrets, VolumeContext: vol.GetVolumeContext(),
		})
		return err
	}
	publish := func(p *binaryPlugin) error {
		_, err := p.node.NodePublishVolume(ctx, &csipb.NodePublishVolumeRequest{
			VolumeId: id, StagingTargetPath: paths[p][0], TargetPath: paths[p][1], VolumeCapability: c, VolumeContext: vol.GetVolumeContext(),
		})
		return err
	}
	unstage := func(p *binaryPlugin) error {
		if _, err := p.node.NodeUnpublishVolume(ctx, &csipb.NodeUnpublishVolumeRequest{VolumeId: id, TargetPath: paths[p][1]}); err != nil {
			return err
		}
		_, err := p.node.NodeUnstageVolume(ctx, &csipb.NodeUnstageVolumeRequest{VolumeId: id, StagingTargetPath: paths[p][0]})
		return err
	}
	// refused checks that p's NodeStage fails because holder has the
	// volume, and that p leaves no device behind.
	refused := func(p *binaryPlugin, holder string) error {
		err := stage(p)
		if status.Code(err) != codes.FailedPrecondition || !strings.Contains(status.Convert(err).Message(), `"`+holder+`"`) {
			return fmt.Errorf("%s's NodeStage while %s has the volume: %v; want FAILED_PRECONDITION naming %s", p.name, holder, err, holder)
		}
		t.Logf("%s refused: %s", p.name, status.Convert(err).Message())
		if l := mountInfo(paths[p][0]); l != "" {
			return fmt.Errorf("%s mounted the volume anyway: %q", p.name, l)
		}
		return nil
	}

	var sum string
	timed(t, "node-a stages and publishes, writes 4 MiB", func() error {
		if err := stage(a); err != nil {
			return err
		}
		if err := publish(a); err != nil {
			return err
		}
		var err error
		sum, err = guestio.WriteRandomFile(paths[a][1]+"/from-a", 4*mib)
		return err
	})
	timed(t, "node-b's NodeStage is refused (twice), node-a keeps writing", func() error {
		for range 2 {
			if err := refused(b, "node-a"); err != nil {
				return err
			}
		}
		// The refused node took nothing from node-a: its writes still
		// reach the image.
		if err := writeFileSync(paths[a][1]+"/after-refusal", []byte("node-a still writes")); err != nil {
			return err
		}
		return guestio.CheckSum(paths[a][1]+"/from-a", sum)
	})
	var unstaged time.Time
	timed(t, "node-a unpublishes and unstages", func() error {
		err := unstage(a)
		unstaged = time.Now()
		return err
	})
	timed(t, "node-b stages now and reads node-a's data", func() error {
		if err := stage(b); err != nil {
			return err
		}
		t.Logf("node-b staged %.2fs after node-a's unstage returned", time.Since(unstaged).Seconds())
		if err := publish(b); err != nil {
			return err
		}
		if err := guestio.CheckSum(paths[b][1]+"/from-a", sum); err != nil {
			return err
		}
		got, err := os.ReadFile(paths[b][1] + "/after-refusal")
		if err != nil || string(got) != "node-a still writes" {
			return fmt.Errorf("node-a's write after the refusal: %q, %v", got, err)
		}
		return writeFileSync(paths[b][1]+"/from-b", []byte("node-b"))
	})
	timed(t, "now node-a is refused", func() error { return refused(a, "node-b") })
	timed(t, "node-b unstages, DeleteVolume", func() error {
		if err := unstage(b); err != nil {
			return err
		}
		_, err := a.ctrl.DeleteVolume(ctx, &csipb.DeleteVolumeRequest{VolumeId: id, Secrets: g.secrets})
		return err
	})
}
