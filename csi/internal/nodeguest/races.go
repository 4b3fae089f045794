package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/purerbd/purerbd/csi"
)

// raceStateDir is the node state of the node services nodeRaces runs in
// this process, apart from the plugin's.
const raceStateDir = "/run/purerbd-races"

// gatedOpener holds the first OpenImage of one image until release is
// closed, after saying so on entered.
type gatedOpener struct {
	csi.ImageOpener
	image   string
	once    sync.Once
	entered chan struct{}
	release chan struct{}
}

func (g *gatedOpener) OpenImage(ctx context.Context, c csi.Cluster, cred csi.Credentials, vol csi.VolumeID, opts csi.OpenImageOptions) (csi.NodeImage, error) {
	if vol.Image == g.image {
		g.once.Do(func() {
			close(g.entered)
			<-g.release
		})
	}
	return g.ImageOpener.OpenImage(ctx, c, cred, vol, opts)
}

func raceNode(ctx context.Context, opener csi.ImageOpener, max int64) (*csi.NodeServer, error) {
	n, err := csi.NewNodeServer(csi.NodeConfig{
		NodeID: "vm-node", MaxVolumes: max, ClusterConfigPath: configPath, Opener: opener,
		StateDir: raceStateDir, Conns: 1, IOTimeout: ioTimeout, ReattachTimeout: 2 * time.Minute,
		Logger: logger("races"),
	})
	if err != nil {
		return nil, err
	}
	return n, n.Start(ctx)
}

func raceStage(ctx context.Context, n *csi.NodeServer, vol, path string) error {
	_, err := n.NodeStageVolume(ctx, &csipb.NodeStageVolumeRequest{
		VolumeId: vol, StagingTargetPath: path, VolumeCapability: rwoBlock, Secrets: secrets,
	})
	return err
}

// nodeRaces runs node services in this process, on their own state:
// two concurrent NodeStage at the volume limit (exactly one wins), and a
// NodeStage that completes while Close runs (Close waits for it; the
// volume stays staged and is released, so that the next node service
// takes it over).
func (s *scenario) nodeRaces(ctx context.Context) error {
	vols := map[string]string{}
	for _, name := range []string{"csi-vol-race-a", "csi-vol-race-b"} {
		f, err := os.Create(imagePath(name))
		if err != nil {
			return err
		}
		err = f.Truncate(16 * mib)
		f.Close()
		if err != nil {
			return err
		}
		vols[name] = csi.VolumeID{ClusterID: clusterID, Pool: 2, Image: name}.String()
		if err := os.MkdirAll(filepath.Join(kubelet, "races", name), 0o750); err != nil {
			return err
		}
	}
	stagingOf := func(name string) string { return filepath.Join(kubelet, "races", name) }
	files := &fileOpener{dir: imageDir, key: cephKey}

	// The volume limit.
	n, err := raceNode(ctx, files, 1)
	if err != nil {
		return err
	}
	errs := make(chan error, 2)
	for _, name := range []string{"csi-vol-race-a", "csi-vol-race-b"} {
		go func() { errs <- raceStage(ctx, n, vols[name], stagingOf(name)) }()
	}
	var won, exhausted int
	for range 2 {
		switch err := <-errs; status.Code(err) {
		case codes.OK:
			won++
		case codes.ResourceExhausted:
			exhausted++
		default:
			return fmt.Errorf("a stage at the limit: %v", err)
		}
	}
	if won != 1 || exhausted != 1 {
		return fmt.Errorf("two stages at a limit of one: %d staged, %d refused", won, exhausted)
	}
	for _, name := range []string{"csi-vol-race-a", "csi-vol-race-b"} {
		if _, err := n.NodeUnstageVolume(ctx, &csipb.NodeUnstageVolumeRequest{VolumeId: vols[name], StagingTargetPath: stagingOf(name)}); err != nil {
			return err
		}
	}
	if err := n.Close(ctx); err != nil {
		return err
	}
	fmt.Println("    two stages at a limit of one: one staged, one RESOURCE_EXHAUSTED")

	// A stage that completes while the node service closes.
	gate := &gatedOpener{ImageOpener: files, image: "csi-vol-race-a", entered: make(chan struct{}), release: make(chan struct{})}
	n, err = raceNode(ctx, gate, 8)
	if err != nil {
		return err
	}
	staged := make(chan error, 1)
	go func() { staged <- raceStage(ctx, n, vols["csi-vol-race-a"], stagingOf("csi-vol-race-a")) }()
	<-gate.entered
	closed := make(chan error, 1)
	go func() {
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		closed <- n.Close(cctx)
	}()
	for {
		_, err := n.NodeUnpublishVolume(ctx, &csipb.NodeUnpublishVolumeRequest{VolumeId: "probe", TargetPath: "/tmp/no-such-target"})
		if status.Code(err) == codes.Unavailable {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	select {
	case err := <-closed:
		close(gate.release)
		return fmt.Errorf("Close returned (%v) while a stage was running", err)
	case <-time.After(500 * time.Millisecond):
	}
	close(gate.release)
	if err := <-staged; err != nil {
		return fmt.Errorf("the stage running when Close began: %w", err)
	}
	if err := <-closed; err != nil {
		return err
	}
	// The next node service takes the volume over: its device is not
	// served any more, and its image is closed (the flock is free).
	n, err = raceNode(ctx, files, 8)
	if err != nil {
		return err
	}
	if _, err := n.NodeGetVolumeHealth(ctx, &csipb.NodeGetVolumeHealthRequest{VolumeId: vols["csi-vol-race-a"]}); err != nil {
		return err
	}
	if err := raceStage(ctx, n, vols["csi-vol-race-a"], stagingOf("csi-vol-race-a")); err != nil {
		return fmt.Errorf("the next node service cannot take the volume staged during Close over: %w", err)
	}
	if _, err := n.NodeUnstageVolume(ctx, &csipb.NodeUnstageVolumeRequest{VolumeId: vols["csi-vol-race-a"], StagingTargetPath: stagingOf("csi-vol-race-a")}); err != nil {
		return err
	}
	if err := n.Close(ctx); err != nil {
		return err
	}
	if _, err := findCookie(vols["csi-vol-race-a"]); err == nil {
		return errors.New("a device still carries the unstaged volume's cookie")
	}
	fmt.Println("    a stage running when Close began: Close waited, the volume was released and taken over")
	return nil
}
