package csi

import (
	"context"
	"errors"
	"testing"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// heldLockImage is an image whose exclusive lock another client holds,
// as csi/rbdstore's TestLockHoldersOnCeph sees it on a real cluster.
type heldLockImage struct {
	lockedImage
	holders []string
	err     error
}

func (i heldLockImage) LockHolders(context.Context) ([]string, error) { return i.holders, i.err }

// TestVolumeHealthHeldIO: a staged volume this process does not serve
// is INACCESSIBLE with a message saying the kernel holds its I/O and for
// how long (the volume's reattach timeout).
func TestVolumeHealthHeldIO(t *testing.T) {
	n, _ := newTestNode(t)
	id := testVolumeID("img-held")
	rec := testRecord(id)
	rec.ReattachTimeout = 90
	n.mu.Lock()
	n.vols[id] = &nodeVolume{rec: rec, broken: errors.New("waiting for secrets")}
	n.mu.Unlock()
	h, err := n.NodeGetVolumeHealth(context.Background(), &csipb.NodeGetVolumeHealthRequest{VolumeId: id})
	require.NoError(t, err)
	e := h.GetVolumeHealth().GetHealthStatuses()
	require.Len(t, e, 1)
	assert.Equal(t, csipb.VolumeHealthErrorType_INACCESSIBLE, e[0].GetStatus())
	assert.Equal(t, "NotServed", e[0].GetReason())
	assert.Contains(t, e[0].GetMessage(), "the kernel holds its I/O for up to 1m30s")
	assert.Contains(t, e[0].GetMessage(), "waiting for secrets")
}

// TestVolumeHealthLockElsewhere: a single writer whose image lock is
// held by another client is DEGRADED, naming the holder; not when the
// node holds it, the volume is not a single writer, or nobody else
// holds it.
func TestVolumeHealthLockElsewhere(t *testing.T) {
	n, _ := newTestNode(t)
	img, err := fileimageOpen(t)
	require.NoError(t, err)
	rec := testRecord(testVolumeID("img-lock"))
	ctx := context.Background()
	state := func(i NodeImage, exclusive bool) volumeState {
		r := *rec
		r.Exclusive = exclusive
		return volumeState{rec: r, img: i}
	}
	other := heldLockImage{lockedImage: lockedImage{fileImage: img, st: LockState{Owner: false, Handovers: 1}}, holders: []string{"client.4242"}}
	e := n.lockElsewhere(ctx, state(other, true))
	require.NotNil(t, e)
	assert.Equal(t, csipb.VolumeHealthErrorType_DEGRADED, e.GetStatus())
	assert.Equal(t, "LockHeldElsewhere", e.GetReason())
	assert.Contains(t, e.GetMessage(), "client.4242")

	assert.Nil(t, n.lockElsewhere(ctx, state(other, false)), "multi-node volumes share the lock")
	owner := other
	owner.st.Owner = true
	assert.Nil(t, n.lockElsewhere(ctx, state(owner, true)), "held by the node")
	nobody := other
	nobody.holders = nil
	assert.Nil(t, n.lockElsewhere(ctx, state(nobody, true)), "released, not yet taken back")
	failing := other
	failing.err = errors.New("timed out")
	assert.Nil(t, n.lockElsewhere(ctx, state(failing, true)), "the header check reports an unreachable cluster")
	assert.Nil(t, n.lockElsewhere(ctx, state(img, true)), "an image without a lock")
}
