package rbdstore

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/purerbd/purerbd/csi"
	"github.com/purerbd/purerbd/rbd"
)

// NodeClaimKey is the image metadata key in which a node that stages a
// single-writer volume records itself: "<node ID> <client>", the client
// being the rados entity ("client.4123") whose header watch shows that
// the stage is alive. The exclusive lock stays cooperative (the
// controller's resizes and snapshots take it for a moment), so it
// cannot say which node owns a volume; this key does.
const NodeClaimKey = "purerbd.node"

// nodeClaim is a parsed NodeClaimKey value.
type nodeClaim struct {
	node, client string
}

func parseNodeClaim(v string) nodeClaim {
	node, client, _ := strings.Cut(strings.TrimSpace(v), " ")
	return nodeClaim{node: node, client: client}
}

func (c nodeClaim) String() string { return c.node + " " + c.client }

// claimForNode makes img, open for writing as client self, the volume
// of node: it refuses (csi.ErrBusy) when another node's live stage
// holds it, and otherwise takes the exclusive lock and records the
// claim. The check is made once before the lock is asked for, so that a
// refused node does not take the lock from the node using the volume,
// and again while holding it, so that two nodes staging at once cannot
// both win. A claim is alive while its client watches the header: a
// node that unstaged, or died and timed out, does not hold the volume;
// a claim of this node (a restarted plugin taking its volumes back) is
// always overridden.
func claimForNode(ctx context.Context, img *rbd.Image, node, self string) error {
	if err := checkNodeClaim(ctx, img, node); err != nil {
		return err
	}
	if err := img.Lock(ctx); err != nil {
		return fmt.Errorf("taking the exclusive lock: %w", err)
	}
	if err := checkNodeClaim(ctx, img, node); err != nil {
		return err
	}
	if err := img.MetadataSet(ctx, NodeClaimKey, nodeClaim{node: node, client: self}.String()); err != nil {
		return fmt.Errorf("recording the node's claim: %w", err)
	}
	return nil
}

// checkNodeClaim returns csi.ErrBusy when a live stage of another node
// holds img.
func checkNodeClaim(ctx context.Context, img *rbd.Image, node string) error {
	v, err := img.MetadataGet(ctx, NodeClaimKey)
	if errors.Is(err, rbd.ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading the node claim: %w", err)
	}
	c := parseNodeClaim(v)
	if c.node == "" || c.node == node {
		return nil
	}
	ws, err := img.Watchers(ctx)
	if err != nil {
		return err
	}
	for _, w := range ws {
		if w.Client == c.client {
			return fmt.Errorf("%w: the image is in use by node %q (staged there for a single writer, %s at %s): unstage it there first",
				csi.ErrBusy, c.node, w.Client, w.Address)
		}
	}
	return nil
}

// releaseNodeClaim removes the claim of img if it is still the one this
// stage made; done at close (NodeUnstage, or a plugin handing its
// devices over to its next process, which claims them again).
func releaseNodeClaim(ctx context.Context, img *rbd.Image, claim string) error {
	v, err := img.MetadataGet(ctx, NodeClaimKey)
	if errors.Is(err, rbd.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if strings.TrimSpace(v) != claim {
		return nil // another stage's claim now
	}
	if err := img.MetadataRemove(ctx, NodeClaimKey); err != nil && !errors.Is(err, rbd.ErrNotFound) {
		return err
	}
	return nil
}
