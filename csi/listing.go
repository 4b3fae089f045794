package csi

import (
	"context"
	"encoding/base64"
	"errors"
	"slices"
	"sort"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Listing scans every configured cluster, every pool whose application is
// rbd, and in each the default namespace and the cluster's configured
// radosNamespace (namespaces named only by StorageClasses are not
// scanned). Volumes are the images with managed names, snapshots the
// managed snapshots of every image, tombstones included (a deleted
// volume's snapshots are still snapshots).

// scanned is one image found by a scan.
type scanned struct {
	cluster Cluster
	pool    int64
	ns      string
	name    string
}

// scanImages lists the images of every cluster, as the credentials that
// credFor returns for each.
func (d *Driver) scanImages(ctx context.Context, credFor func(Cluster) (Credentials, error), visit func(Session, Credentials, scanned) error) error {
	return d.scanNamespaces(ctx, credFor, func(s Session, cred Credentials, c Cluster, pool int64, ns string) error {
		names, err := s.ListImages(ctx, pool, ns)
		if errors.Is(err, ErrNotFound) {
			return nil // namespace absent from this pool
		}
		if err != nil {
			return storeError(err, cred, "cluster %q pool %d: listing images", c.ID, pool)
		}
		for _, n := range names {
			if err := visit(s, cred, scanned{cluster: c, pool: pool, ns: ns, name: n}); err != nil {
				return err
			}
		}
		return nil
	})
}

// scanNamespaces visits the scanned pool namespaces of every cluster, as
// the credentials that credFor returns for each.
func (d *Driver) scanNamespaces(ctx context.Context, credFor func(Cluster) (Credentials, error), visit func(s Session, cred Credentials, c Cluster, pool int64, ns string) error) error {
	cs, err := d.clusters()
	if err != nil {
		return status.Error(codes.FailedPrecondition, err.Error())
	}
	for _, c := range cs {
		cred, err := credFor(c)
		if errors.Is(err, errNoCredentials) {
			continue
		}
		if err != nil {
			return err
		}
		s, err := d.cfg.Store.Session(ctx, c, cred)
		if err != nil {
			return storeError(err, cred, "cluster %q", c.ID)
		}
		pools, err := s.RBDPools(ctx)
		if err != nil {
			return storeError(err, cred, "cluster %q: listing pools", c.ID)
		}
		namespaces := []string{""}
		if c.Namespace != "" {
			namespaces = append(namespaces, c.Namespace)
		}
		for _, pool := range pools {
			for _, ns := range namespaces {
				if err := visit(s, cred, c, pool, ns); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// page holds sorted IDs and picks one page of them.
type page[T any] struct {
	ids     []string
	entries map[string]T
}

func (p *page[T]) add(id string, e T) {
	if p.entries == nil {
		p.entries = map[string]T{}
	}
	if _, dup := p.entries[id]; !dup {
		p.ids = append(p.ids, id)
	}
	p.entries[id] = e
}

// Pagination tokens are the base64url of the last ID of the previous
// page; the next page starts after it in byte order. Entries added or
// removed between pages are therefore neither repeated nor skipped,
// apart from the added ones that sort before the token.
func encodeToken(id string) string { return base64.RawURLEncoding.EncodeToString([]byte(id)) }

// decodeToken checks a token against valid, which tells whether its
// content is an ID of the listed kind.
func decodeToken(tok string, valid func(string) bool) (string, error) {
	if tok == "" {
		return "", nil
	}
	b, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil || !valid(string(b)) {
		return "", status.Errorf(codes.Aborted, "invalid starting token %q", tok)
	}
	return string(b), nil
}

// take returns at most max entries (0: all) after the token, and the
// token of the page after them.
func (p *page[T]) take(after string, max int32) ([]T, string) {
	sort.Strings(p.ids)
	i, _ := slices.BinarySearch(p.ids, after)
	if i < len(p.ids) && p.ids[i] == after {
		i++
	}
	if after == "" {
		i = 0
	}
	rest := p.ids[i:]
	next := ""
	if max > 0 && len(rest) > int(max) {
		rest = rest[:max]
		next = encodeToken(rest[len(rest)-1])
	}
	out := make([]T, len(rest))
	for j, id := range rest {
		out[j] = p.entries[id]
	}
	return out, next
}

// Sweep collects what a crash may have left behind: tombstoned images
// whose snapshots are all gone (and the ancestors they release),
// internal or tombstoned snapshots no clone needs any more, and the
// groups of interrupted group snapshots (groupsweep.go). It touches
// only images the driver owns (ownership.go) and, on them, only the
// snapshots it made. It uses the plugin's own credentials and skips
// clusters it has none for. Run calls it periodically; it is safe to
// call at any time.
func (d *Driver) Sweep(ctx context.Context) error {
	credFor := func(c Cluster) (Credentials, error) {
		if d.cfg.Credentials != nil {
			if cred, ok := d.cfg.Credentials(c.ID); ok {
				return cred, nil
			}
		}
		return Credentials{}, errNoCredentials
	}
	var firstErr error
	// Groups first: an interrupted group snapshot's member snapshots
	// keep deleted volumes as tombstones the image sweep then removes.
	err := d.scanNamespaces(ctx, credFor, func(s Session, cred Credentials, c Cluster, pool int64, ns string) error {
		if err := d.sweepGroups(ctx, s, cred, c, pool, ns); err != nil && firstErr == nil {
			firstErr = err
		}
		return nil
	})
	if err != nil {
		return err
	}
	err = d.scanImages(ctx, func(c Cluster) (Credentials, error) {
		cred, err := credFor(c)
		if err != nil {
			d.log.Debug("sweep: no credentials, skipping cluster", "cluster", c.ID)
		}
		return cred, err
	}, func(s Session, cred Credentials, im scanned) error {
		if !hasManagedShape(im.name) {
			return nil
		}
		img := ImageRef{Pool: im.pool, Namespace: im.ns, Name: im.name}
		unlock, err := d.inFlight.lock(imageKey(im.cluster.ID, img))
		if err != nil {
			return nil // busy: next time
		}
		defer unlock()
		o, err := ownedImage(ctx, s, img)
		switch {
		case errors.Is(err, errNotOwned):
			d.log.Debug("sweep: leaving alone an image the driver does not own", "image", im.name, "reason", err.Error())
			return nil
		case errors.Is(err, ErrNotFound):
			return nil // removed since the listing
		case err != nil:
		case o.tomb:
			err = d.sweepAcross(ctx, s, im.cluster.ID, img, func() error { return d.retire(ctx, s, cred, o) })
		default:
			// Holding the image's locks means no CreateVolume is
			// cloning from it right now, so an internal snapshot
			// without clones is a leftover. The replicas' lock is
			// taken only for an image that has one: most have none.
			var collect bool
			if collect, err = hasCollectableSnap(ctx, s, img); collect {
				err = d.sweepAcross(ctx, s, im.cluster.ID, img, func() error {
					_, err := d.purgeSnapshots(ctx, s, o.ref)
					return err
				})
			}
		}
		if err != nil && firstErr == nil {
			firstErr = err
		}
		return nil
	})
	if err != nil {
		return err
	}
	return firstErr
}

// sweepAcross runs the sweep's work on img under the operation lock the
// controller's replicas share; an image another replica is working on
// is left for the next sweep.
func (d *Driver) sweepAcross(ctx context.Context, s Session, cluster string, img ImageRef, work func() error) error {
	unlock, err := d.lockAcross(ctx, s, cluster, img)
	if status.Code(err) == codes.Aborted {
		return nil
	}
	if err != nil {
		return err
	}
	defer unlock()
	return work()
}

// hasCollectableSnap reports whether img has a snapshot purgeSnapshots
// would remove.
func hasCollectableSnap(ctx context.Context, s Session, img ImageRef) (bool, error) {
	snaps, err := s.ListSnapshots(ctx, img)
	if err != nil {
		return false, err
	}
	return slices.ContainsFunc(snaps, isCollectableSnap), nil
}

var errNoCredentials = errors.New("no plugin credentials")
