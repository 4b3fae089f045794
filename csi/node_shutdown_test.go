package csi

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"

	"github.com/purerbd/purerbd/nbd/kernel"
)

// gateOpener holds every OpenImage until the test lets it go, then
// fails it as an image that does not exist: the host tests never reach
// the kernel.
type gateOpener struct {
	entered chan string
	release chan struct{}
}

func (g *gateOpener) OpenImage(ctx context.Context, c Cluster, cred Credentials, vol VolumeID, opts OpenImageOptions) (NodeImage, error) {
	g.entered <- vol.Image
	select {
	case <-g.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return nil, ErrNotFound
}

func stageReq(t *testing.T, image string) *csi.NodeStageVolumeRequest {
	return &csi.NodeStageVolumeRequest{
		VolumeId: testVolumeID(image), StagingTargetPath: filepath.Join(t.TempDir(), "s"),
		VolumeCapability: blockCap(csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER),
		Secrets:          map[string]string{"userID": "u", "userKey": "good-key"},
	}
}

// TestNodeMaxVolumesConcurrent: a stage in progress holds its place
// under the volume limit, so a second stage at the limit is refused at
// once instead of both passing the check; the place is given back when
// the first stage fails.
func TestNodeMaxVolumesConcurrent(t *testing.T) {
	ctx := context.Background()
	n, _ := newTestNode(t)
	g := &gateOpener{entered: make(chan string, 4), release: make(chan struct{})}
	n.cfg.Opener = g
	n.cfg.MaxVolumes = 1

	first := make(chan error, 1)
	go func() {
		_, err := n.NodeStageVolume(ctx, stageReq(t, "a"))
		first <- err
	}()
	select {
	case <-g.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the first stage did not reach OpenImage")
	}
	second := make(chan error, 1)
	go func() {
		_, err := n.NodeStageVolume(ctx, stageReq(t, "b"))
		second <- err
	}()
	select {
	case err := <-second:
		assert.Equal(t, codes.ResourceExhausted, code(err), "%v", err)
	case img := <-g.entered:
		close(g.release)
		t.Fatalf("a second stage (%s) went past the limit", img)
	}

	close(g.release)
	assert.Equal(t, codes.NotFound, code(<-first))
	_, err := n.NodeStageVolume(ctx, stageReq(t, "c"))
	assert.Equal(t, codes.NotFound, code(err), "the failed stage gave its place back: %v", err)
	assert.Equal(t, "c", <-g.entered)
	assert.Zero(t, n.staging)
}

// TestNodeCloseWaitsForCalls: Close refuses new calls at once, waits for
// the ones running (while every device is still served), and gives up
// waiting at half of its deadline.
func TestNodeCloseWaitsForCalls(t *testing.T) {
	n, _ := newTestNode(t)
	unlock, err := n.lockVolume("v", "/a")
	require.NoError(t, err)
	closed := make(chan error, 1)
	go func() { closed <- n.Close(context.Background()) }()
	require.Eventually(t, func() bool {
		u, err := n.lockVolume("w")
		if err == nil {
			u() // Close has not begun yet
		}
		return code(err) == codes.Unavailable
	}, 5*time.Second, time.Millisecond)
	select {
	case <-closed:
		t.Fatal("Close returned while a call was running")
	case <-time.After(200 * time.Millisecond):
	}
	unlock()
	select {
	case err := <-closed:
		require.NoError(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return after the call ended")
	}

	n2, _ := newTestNode(t)
	_, err = n2.lockVolume("v")
	require.NoError(t, err) // never unlocked
	ctx, cancel := context.WithTimeout(context.Background(), 400*time.Millisecond)
	defer cancel()
	start := time.Now()
	require.NoError(t, n2.Close(ctx))
	assert.Less(t, time.Since(start), 350*time.Millisecond, "waits half the deadline at most")
}

// closeCounter is an image that counts its closes.
type closeCounter struct {
	fileImage
	mu     sync.Mutex
	closes int
}

func (c *closeCounter) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closes++
	return nil
}

// TestNodeStagedAfterClose: a volume whose stage ends after Close began
// is released by the stage itself (its image closed, not served), and
// stays staged for the next process.
func TestNodeStagedAfterClose(t *testing.T) {
	ctx := context.Background()
	n, _ := newTestNode(t)
	slot, err := n.reserveSlot()
	require.NoError(t, err)
	require.NoError(t, n.Close(ctx))
	img := &closeCounter{}
	v := &nodeVolume{rec: testRecord(testVolumeID("late")), img: img}
	n.addStaged(ctx, v, kernel.AttachConfig{}, slot)
	assert.Equal(t, 1, img.closes, "released: the image is closed")
	s := n.stateOf(v)
	assert.Nil(t, s.img)
	assert.Error(t, s.broken, "not served by this process")
	assert.NotNil(t, n.volume(testVolumeID("late")), "still staged")
	assert.Zero(t, n.staging)
	assert.Nil(t, v.watch)
}
