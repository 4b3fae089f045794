package rbdstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/purerbd/purerbd/csi"
	"github.com/purerbd/purerbd/rbd"
)

// A node that stages a single-writer volume claims it with NodeClaimLock,
// an exclusive lock of RADOS' `lock` class on the image's header (an
// rbd.HeaderLock) whose cookie is the node ID. Taking a lock is one
// atomic operation on the OSD: of two nodes staging at once, exactly one
// gets it. The exclusive lock of RBD ("rbd_lock", librbd's) stays
// cooperative (the controller's resizes and snapshots take it for a
// moment), so it cannot say which node owns a volume; this lock does,
// and librbd and krbd never look at it.
//
// A claim is alive while the client that took it still watches the
// header. The client is recognised by its address, whose nonce is fixed
// for the life of a rados connection, as librbd recognises the owner of
// its lock: the entity name (client.<global id>) changes when the client
// authenticates anew, and the watch handle when the watch is
// re-registered, while the stage goes on. A claim of the same node (a
// restarted plugin taking its volumes back) is always taken over; a
// claim whose client no longer watches (the node unstaged, or died and
// its watch timed out) is broken.
const (
	NodeClaimLock = "purerbd_node"
	nodeClaimTag  = "purerbd"
	nodeClaimDesc = "purerbd: staged here for a single writer"
	// NodeClaimKey is the image metadata key in which the claiming node
	// also records itself, "<node ID> <client>", for operators (`rbd
	// image-meta get`) and for plugins older than NodeClaimLock, which
	// honour only it.
	NodeClaimKey = "purerbd.node"
)

// claimAttempts bounds the rounds of taking, inspecting and breaking the
// lock; each round either wins, refuses, or breaks a claim that is gone,
// so only nodes taking each other's claims over and over exhaust it.
const claimAttempts = 8

// nodeClaim is a parsed NodeClaimKey value.
type nodeClaim struct {
	node, client string
}

func parseNodeClaim(v string) nodeClaim {
	node, client, _ := strings.Cut(strings.TrimSpace(v), " ")
	return nodeClaim{node: node, client: client}
}

func (c nodeClaim) String() string { return c.node + " " + c.client }

// nodeClaimLock is the header lock a node takes.
func nodeClaimLock(node string) rbd.HeaderLock {
	return rbd.HeaderLock{Name: NodeClaimLock, Cookie: node, Tag: nodeClaimTag, Description: nodeClaimDesc}
}

// claimer claims, and releases, the header of one open image for a node.
type claimer struct {
	img  *rbd.Image
	node string
	log  *slog.Logger
	// pause, when set (tests), is called before each attempt to take
	// the lock: a slow node between deciding and acting.
	pause func(node string)
}

// heldClaim is what an open that claimed its volume releases at close.
type heldClaim struct {
	locker string // the client the OSD recorded as the lock's holder
	meta   string // the NodeClaimKey value written
}

// claim makes the image, open for writing as client self, the volume of
// c.node: it takes NodeClaimLock (csi.ErrBusy when another node's live
// stage holds it), honours an older plugin's claim, takes RBD's
// exclusive lock and records the claim in the image metadata.
func (c *claimer) claim(ctx context.Context, self string) (*heldClaim, error) {
	locker, err := c.lock(ctx)
	if err != nil {
		return nil, err
	}
	h := &heldClaim{locker: locker}
	err = c.checkLegacy(ctx)
	if err == nil {
		if err = c.img.Lock(ctx); err != nil {
			err = fmt.Errorf("taking the exclusive lock: %w", err)
		}
	}
	if err == nil {
		h.meta = nodeClaim{node: c.node, client: self}.String()
		if err = c.img.MetadataSet(ctx, NodeClaimKey, h.meta); err != nil {
			err = fmt.Errorf("recording the node's claim: %w", err)
		}
	}
	if err != nil {
		c.release(context.WithoutCancel(ctx), h)
		return nil, err
	}
	return h, nil
}

// lock takes NodeClaimLock and returns the holder the OSD recorded.
func (c *claimer) lock(ctx context.Context) (string, error) {
	for range claimAttempts {
		if c.pause != nil {
			c.pause(c.node)
		}
		err := c.img.LockHeader(ctx, nodeClaimLock(c.node))
		if err != nil && !errors.Is(err, rbd.ErrExists) && !errors.Is(err, rbd.ErrBusy) {
			return "", fmt.Errorf("taking the node claim: %w", err)
		}
		lockers, ierr := c.img.HeaderLockers(ctx, NodeClaimLock)
		if ierr != nil {
			return "", fmt.Errorf("reading the node claim: %w", ierr)
		}
		if err == nil || errors.Is(err, rbd.ErrExists) {
			// ErrExists: this client holds it already (the same stage
			// opened twice by one process).
			for _, lk := range lockers {
				if lk.Cookie == c.node {
					return lk.Client, nil
				}
			}
			continue // broken at once by a node that took this one for dead
		}
		if err := c.breakDead(ctx, lockers); err != nil {
			return "", err
		}
	}
	return "", fmt.Errorf("%w: the node claim changed hands %d times while node %q tried to take it", csi.ErrUnavailable, claimAttempts, c.node)
}

// breakDead breaks the holders of the claim that are this node (an
// earlier process of its plugin) or gone, and refuses with csi.ErrBusy
// when another node's stage is alive.
func (c *claimer) breakDead(ctx context.Context, lockers []rbd.HeaderLocker) error {
	if len(lockers) == 0 {
		return nil
	}
	ws, err := c.img.Watchers(ctx)
	if err != nil {
		return err
	}
	for _, lk := range lockers {
		if lk.Cookie != c.node {
			if w, ok := claimAlive(lk, ws); ok {
				return inUse(lk.Cookie, w)
			}
			c.log.Info("taking over the claim of a node whose stage is gone",
				"image", c.img.Name(), "node", lk.Cookie, "client", lk.Client, "addr", lk.Address)
		}
		err := c.img.BreakHeaderLock(ctx, NodeClaimLock, lk.Client, lk.Cookie)
		if err != nil && !errors.Is(err, rbd.ErrNotFound) {
			return fmt.Errorf("breaking the node claim of %q: %w", lk.Cookie, err)
		}
	}
	return nil
}

// inUse is the refusal of a volume that node's live stage w holds.
func inUse(node string, w rbd.Watcher) error {
	return fmt.Errorf("%w: the image is in use by node %q (staged there for a single writer, %s at %s): unstage it there first",
		csi.ErrBusy, node, w.Client, w.Address)
}

// claimAlive finds the watch of the client that took lk: same address
// (IP, port and nonce; the address type may be written differently), or
// the same entity.
func claimAlive(lk rbd.HeaderLocker, ws []rbd.Watcher) (rbd.Watcher, bool) {
	for _, w := range ws {
		if lk.HeldBy(w) {
			return w, true
		}
	}
	return rbd.Watcher{}, false
}

// checkLegacy refuses (csi.ErrBusy) when the metadata names another
// node whose client still watches the header: a plugin older than
// NodeClaimLock, which records its claims there only.
func (c *claimer) checkLegacy(ctx context.Context) error {
	v, err := c.img.MetadataGet(ctx, NodeClaimKey)
	if errors.Is(err, rbd.ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading the node claim: %w", err)
	}
	mc := parseNodeClaim(v)
	if mc.node == "" || mc.node == c.node {
		return nil
	}
	ws, err := c.img.Watchers(ctx)
	if err != nil {
		return err
	}
	for _, w := range ws {
		if w.Client == mc.client {
			return inUse(mc.node, w)
		}
	}
	return nil
}

// release removes the claim h if it is still the one this stage made:
// done at close (NodeUnstage, or a plugin handing its devices over to
// its next process, which claims them again). The lock is broken by its
// recorded holder rather than unlocked, so that a client that has
// authenticated anew since still releases it; a later process of the
// node holds it under another entity and keeps it.
func (c *claimer) release(ctx context.Context, h *heldClaim) {
	if h.meta != "" {
		v, err := c.img.MetadataGet(ctx, NodeClaimKey)
		switch {
		case errors.Is(err, rbd.ErrNotFound):
		case err != nil:
			c.log.Warn("reading the node claim", "image", c.img.Name(), "error", err.Error())
		case strings.TrimSpace(v) == h.meta:
			if err := c.img.MetadataRemove(ctx, NodeClaimKey); err != nil && !errors.Is(err, rbd.ErrNotFound) {
				c.log.Warn("removing the node claim", "image", c.img.Name(), "error", err.Error())
			}
		}
	}
	err := c.img.BreakHeaderLock(ctx, NodeClaimLock, h.locker, c.node)
	if err != nil && !errors.Is(err, rbd.ErrNotFound) {
		// The claim is dead once the header watch goes: no harm.
		c.log.Warn("releasing the node claim", "image", c.img.Name(), "error", err.Error())
	}
}
