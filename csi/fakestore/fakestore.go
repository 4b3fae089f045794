// Package fakestore is a fake: an in-memory csi.ImageStore for unit tests
// of the CSI controller's logic (idempotency, failure injection, error
// codes). It imitates the RBD rules the controller relies on (an image
// with snapshots cannot be removed, a snapshot with clone children cannot
// be removed, clones name their parent by image ID and snapshot ID, cephx
// refuses a wrong key) and nothing else: no data, no features, no
// watchers beyond a flag. Tests that need real RBD use csi/rbdstore on a
// radostest cluster.
package fakestore

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/purerbd/purerbd/csi"
)

// Store is the fake image store. The zero value is not usable; call New.
type Store struct {
	mu       sync.Mutex
	clusters map[string]*cluster
	nextID   uint64
	// Now gives snapshot creation times; time.Now if nil.
	Now func() time.Time
	// TrashSnapshots makes RemoveSnapshot behave as librbd's does with
	// clone v2: a snapshot that clones need goes to the snapshot trash
	// (hidden from ListSnapshots, still blocking RemoveImage) and is
	// removed with its last clone. Without it, such a removal fails with
	// ErrBusy.
	TrashSnapshots bool
	// crashGroupSnap: see CrashNextGroupSnapshot
	crashGroupSnap bool
}

type cluster struct {
	users   map[string]string // user -> key
	pools   map[int64]*pool
	nextPID int64
	down    bool
	// opLocks are the operation locks held, by pool, namespace and key
	opLocks map[string]bool
}

type pool struct {
	name       string
	avail      int64
	namespaces map[string]*namespace
}

type namespace struct {
	images       map[string]*image // by ID
	reservations map[string]string
	ghosts       map[string]bool              // names taken by an interrupted creation
	objects      map[string]map[string]string // other RADOS objects' omaps (ceph-csi's journal)
	groups       map[string]*group            // RBD groups, by name
}

type image struct {
	id, name string
	size     uint64
	opts     csi.ImageOptions
	parent   *csi.ParentInfo
	snaps    []*csi.SnapInfo
	trash    []*csi.SnapInfo // snapshots removed while clones needed them
	meta     map[string]string
	inUse    bool
	nextSnap uint64
	group    *group          // the group the image belongs to, nil for none
	gsnaps   []*csi.SnapInfo // member snapshots of group snapshots
}

// New returns an empty store.
func New() *Store { return &Store{clusters: map[string]*cluster{}} }

// AddCluster adds a cluster with the given users and keys.
func (s *Store) AddCluster(id string, users map[string]string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.clusters[id] = &cluster{users: users, pools: map[int64]*pool{}, nextPID: 1}
}

// AddPool adds a pool with an empty default namespace and returns its ID.
func (s *Store) AddPool(clusterID, name string, avail int64) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.clusters[clusterID]
	id := c.nextPID
	c.nextPID++
	c.pools[id] = &pool{name: name, avail: avail, namespaces: map[string]*namespace{"": newNamespace()}}
	return id
}

// AddNamespace creates a RADOS namespace in a pool.
func (s *Store) AddNamespace(clusterID string, poolID int64, ns string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.clusters[clusterID].pools[poolID].namespaces[ns] = newNamespace()
}

// SetDown makes a cluster unreachable (or reachable again).
func (s *Store) SetDown(clusterID string, down bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.clusters[clusterID].down = down
}

// SetInUse marks an image as watched (mapped by a node), so removing it
// fails.
func (s *Store) SetInUse(clusterID string, poolID int64, ns, name string, inUse bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, err := s.ns(clusterID, poolID, ns)
	if err != nil {
		return err
	}
	im := n.byName(name)
	if im == nil {
		return fmt.Errorf("image %s: %w", name, csi.ErrNotFound)
	}
	im.inUse = inUse
	return nil
}

// ImageState is a snapshot of one fake image, for assertions; trashed
// snapshots are listed as "(trash)NAME", group snapshot members as
// "(group)NAME".
type ImageState struct {
	Pool      int64
	Namespace string
	Name, ID  string
	Size      uint64
	Parent    *csi.ParentInfo
	Snaps     []string
	Meta      map[string]string
	// Options are those the image was created or cloned with.
	Options csi.ImageOptions
}

// Images lists every image of a cluster, sorted by pool, namespace, name.
func (s *Store) Images(clusterID string) []ImageState {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []ImageState
	for pid, p := range s.clusters[clusterID].pools {
		for nsName, n := range p.namespaces {
			for _, im := range n.images {
				st := ImageState{Pool: pid, Namespace: nsName, Name: im.name, ID: im.id, Size: im.size, Parent: im.parent, Meta: map[string]string{}, Options: im.opts}
				for _, sn := range im.snaps {
					st.Snaps = append(st.Snaps, sn.Name)
				}
				for _, sn := range im.gsnaps {
					st.Snaps = append(st.Snaps, "(group)"+sn.Name)
				}
				for _, sn := range im.trash {
					st.Snaps = append(st.Snaps, "(trash)"+sn.Name)
				}
				for k, v := range im.meta {
					st.Meta[k] = v
				}
				out = append(out, st)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Pool != b.Pool {
			return a.Pool < b.Pool
		}
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		return a.Name < b.Name
	})
	return out
}

// Reservations returns a copy of a namespace's reservation table.
func (s *Store) Reservations(clusterID string, poolID int64, ns string) map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]string{}
	if n, err := s.ns(clusterID, poolID, ns); err == nil {
		for k, v := range n.reservations {
			out[k] = v
		}
	}
	return out
}

func newNamespace() *namespace {
	return &namespace{images: map[string]*image{}, reservations: map[string]string{}, ghosts: map[string]bool{}, objects: map[string]map[string]string{},
		groups: map[string]*group{}}
}

// AddGhost leaves what an image creation interrupted halfway leaves in
// RBD: the name is taken (creating it fails with ErrExists) but there is
// no image (opening it fails with ErrNotFound) until it is removed.
func (s *Store) AddGhost(clusterID string, poolID int64, ns, name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.clusters[clusterID].pools[poolID].namespaces[ns].ghosts[name] = true
}

func (n *namespace) byName(name string) *image {
	for _, im := range n.images {
		if im.name == name {
			return im
		}
	}
	return nil
}

func (s *Store) ns(clusterID string, poolID int64, ns string) (*namespace, error) {
	c := s.clusters[clusterID]
	if c == nil {
		return nil, fmt.Errorf("cluster %q: %w", clusterID, csi.ErrNotFound)
	}
	p := c.pools[poolID]
	if p == nil {
		return nil, fmt.Errorf("pool %d: %w", poolID, csi.ErrNotFound)
	}
	n := p.namespaces[ns]
	if n == nil {
		return nil, fmt.Errorf("namespace %q: %w", ns, csi.ErrNotFound)
	}
	return n, nil
}

// Reachable reports an error for clusters set down or unknown.
func (s *Store) Reachable(_ context.Context, c csi.Cluster) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	cl := s.clusters[c.ID]
	if cl == nil || cl.down {
		return fmt.Errorf("monitors %v: %w", c.Monitors, csi.ErrUnavailable)
	}
	return nil
}

// Session checks the credentials like cephx would.
func (s *Store) Session(ctx context.Context, c csi.Cluster, cred csi.Credentials) (csi.Session, error) {
	if err := s.Reachable(ctx, c); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if key, ok := s.clusters[c.ID].users[cred.ID]; !ok || key != cred.Key {
		return nil, fmt.Errorf("client.%s: %w", cred.ID, csi.ErrUnauthenticated)
	}
	return &session{s: s, cluster: c.ID}, nil
}

type session struct {
	s       *Store
	cluster string
}

// LockOperation holds key until release; every session of the Store
// (every driver sharing it: replicas of a controller) sees the lock.
func (ss *session) LockOperation(ctx context.Context, pool int64, ns, key string) (func(), error) {
	ss.s.mu.Lock()
	defer ss.s.mu.Unlock()
	cl := ss.s.clusters[ss.cluster]
	if cl.opLocks == nil {
		cl.opLocks = map[string]bool{}
	}
	k := fmt.Sprintf("%d/%s/%s", pool, ns, key)
	if cl.opLocks[k] {
		return nil, fmt.Errorf("operation lock of %s: %w", key, csi.ErrBusy)
	}
	cl.opLocks[k] = true
	return func() {
		ss.s.mu.Lock()
		defer ss.s.mu.Unlock()
		delete(cl.opLocks, k)
	}, nil
}

// with runs f under the store lock, failing when the cluster is down.
func (se *session) with(f func(c *cluster) error) error {
	se.s.mu.Lock()
	defer se.s.mu.Unlock()
	c := se.s.clusters[se.cluster]
	if c.down {
		return fmt.Errorf("cluster %q: %w", se.cluster, csi.ErrUnavailable)
	}
	return f(c)
}

// image runs f on one image found by name or ID.
func (se *session) image(ref csi.ImageRef, f func(n *namespace, im *image) error) error {
	return se.with(func(*cluster) error {
		n, err := se.s.ns(se.cluster, ref.Pool, ref.Namespace)
		if err != nil {
			return err
		}
		var im *image
		if ref.Name != "" {
			im = n.byName(ref.Name)
		} else {
			im = n.images[ref.ID]
		}
		if im == nil {
			return fmt.Errorf("image %q (id %q): %w", ref.Name, ref.ID, csi.ErrNotFound)
		}
		return f(n, im)
	})
}

func (se *session) Ping(context.Context) error { return se.with(func(*cluster) error { return nil }) }

func (se *session) LookupPool(_ context.Context, name string) (int64, error) {
	var id int64 = -1
	err := se.with(func(c *cluster) error {
		for pid, p := range c.pools {
			if p.name == name {
				id = pid
				return nil
			}
		}
		return fmt.Errorf("pool %q: %w", name, csi.ErrNotFound)
	})
	return id, err
}

func (se *session) PoolName(_ context.Context, id int64) (string, error) {
	var name string
	err := se.with(func(c *cluster) error {
		p := c.pools[id]
		if p == nil {
			return fmt.Errorf("pool %d: %w", id, csi.ErrNotFound)
		}
		name = p.name
		return nil
	})
	return name, err
}

func (se *session) RBDPools(context.Context) ([]int64, error) {
	var ids []int64
	err := se.with(func(c *cluster) error {
		for id := range c.pools {
			ids = append(ids, id)
		}
		slices.Sort(ids)
		return nil
	})
	return ids, err
}

func (se *session) PoolAvailable(_ context.Context, id int64) (int64, error) {
	var avail int64
	err := se.with(func(c *cluster) error {
		p := c.pools[id]
		if p == nil {
			return fmt.Errorf("pool %d: %w", id, csi.ErrNotFound)
		}
		avail = p.avail
		return nil
	})
	return avail, err
}

func (se *session) newImage(n *namespace, name string, size uint64, opts csi.ImageOptions) (*image, error) {
	if name == "" {
		return nil, fmt.Errorf("empty image name")
	}
	if n.byName(name) != nil || n.ghosts[name] {
		return nil, fmt.Errorf("image %s: %w", name, csi.ErrExists)
	}
	se.s.nextID++
	im := &image{id: fmt.Sprintf("%012x", 0x1000000+se.s.nextID), name: name, size: size, opts: opts, meta: map[string]string{}, nextSnap: 4}
	n.images[im.id] = im
	return im, nil
}

func (se *session) CreateImage(_ context.Context, ref csi.ImageRef, size uint64, opts csi.ImageOptions) error {
	return se.with(func(c *cluster) error {
		n, err := se.s.ns(se.cluster, ref.Pool, ref.Namespace)
		if err != nil {
			return err
		}
		if err := checkDataPool(c, opts); err != nil {
			return err
		}
		_, err = se.newImage(n, ref.Name, size, opts)
		return err
	})
}

func checkDataPool(c *cluster, opts csi.ImageOptions) error {
	if opts.DataPool == "" {
		return nil
	}
	for _, p := range c.pools {
		if p.name == opts.DataPool {
			return nil
		}
	}
	return fmt.Errorf("data pool %q: %w", opts.DataPool, csi.ErrNotFound)
}

func (se *session) CloneImage(_ context.Context, parent csi.ImageRef, snap string, child csi.ImageRef, opts csi.ImageOptions) error {
	return se.with(func(c *cluster) error {
		pn, err := se.s.ns(se.cluster, parent.Pool, parent.Namespace)
		if err != nil {
			return err
		}
		var pim *image
		if parent.Name != "" {
			pim = pn.byName(parent.Name)
		} else {
			pim = pn.images[parent.ID]
		}
		if pim == nil {
			return fmt.Errorf("parent image %q: %w", parent.Name, csi.ErrNotFound)
		}
		var sn *csi.SnapInfo
		for _, x := range pim.snaps {
			if x.Name == snap {
				sn = x
			}
		}
		if sn == nil {
			return fmt.Errorf("parent snapshot %s@%s: %w", pim.name, snap, csi.ErrNotFound)
		}
		return se.cloneSnap(c, parent, pim, sn, child, opts)
	})
}

// cloneSnap makes child a clone of snapshot sn of parent's image pim.
func (se *session) cloneSnap(c *cluster, parent csi.ImageRef, pim *image, sn *csi.SnapInfo, child csi.ImageRef, opts csi.ImageOptions) error {
	cn, err := se.s.ns(se.cluster, child.Pool, child.Namespace)
	if err != nil {
		return err
	}
	if err := checkDataPool(c, opts); err != nil {
		return err
	}
	im, err := se.newImage(cn, child.Name, sn.Size, opts)
	if err != nil {
		return err
	}
	im.parent = &csi.ParentInfo{Pool: parent.Pool, Namespace: parent.Namespace, ImageID: pim.id, SnapID: sn.ID}
	return nil
}

func (se *session) StatImage(_ context.Context, ref csi.ImageRef) (csi.ImageInfo, error) {
	var info csi.ImageInfo
	err := se.image(ref, func(_ *namespace, im *image) error {
		info = csi.ImageInfo{Name: im.name, ID: im.id, Size: im.size}
		if im.parent != nil {
			p := *im.parent
			info.Parent = &p
		}
		return nil
	})
	return info, err
}

func (se *session) ListImages(_ context.Context, poolID int64, ns string) ([]string, error) {
	var names []string
	err := se.with(func(*cluster) error {
		n, err := se.s.ns(se.cluster, poolID, ns)
		if err != nil {
			return err
		}
		for _, im := range n.images {
			names = append(names, im.name)
		}
		sort.Strings(names)
		return nil
	})
	return names, err
}

// children counts the clones of one snapshot, in every pool.
func (c *cluster) children(poolID int64, ns, imageID string, snapID uint64) int {
	k := 0
	for _, p := range c.pools {
		for _, n := range p.namespaces {
			for _, im := range n.images {
				if pa := im.parent; pa != nil && pa.Pool == poolID && pa.Namespace == ns && pa.ImageID == imageID && pa.SnapID == snapID {
					k++
				}
			}
		}
	}
	return k
}

func (se *session) RemoveImage(_ context.Context, ref csi.ImageRef) error {
	cleared := false
	se.with(func(*cluster) error {
		if n, err := se.s.ns(se.cluster, ref.Pool, ref.Namespace); err == nil && ref.Name != "" && n.ghosts[ref.Name] {
			delete(n.ghosts, ref.Name)
			cleared = true
		}
		return nil
	})
	if cleared {
		return nil
	}
	return se.image(ref, func(n *namespace, im *image) error {
		if k := len(im.snaps) + len(im.trash) + len(im.gsnaps); k > 0 {
			return fmt.Errorf("image %s has %d snapshots: %w", im.name, k, csi.ErrHasSnapshots)
		}
		if im.group != nil {
			return fmt.Errorf("image %s is in group %s: %w", im.name, im.group.name, csi.ErrInGroup)
		}
		if im.inUse {
			return fmt.Errorf("image %s has watchers: %w", im.name, csi.ErrBusy)
		}
		delete(n.images, im.id)
		se.emptyTrash(im.parent)
		return nil
	})
}

// emptyTrash removes a trashed parent snapshot whose last clone went,
// as librbd does when it detaches a clone; the store lock is held.
func (se *session) emptyTrash(p *csi.ParentInfo) {
	if p == nil {
		return
	}
	c := se.s.clusters[se.cluster]
	n, err := se.s.ns(se.cluster, p.Pool, p.Namespace)
	if err != nil {
		return
	}
	pim := n.images[p.ImageID]
	if pim == nil || c.children(p.Pool, p.Namespace, p.ImageID, p.SnapID) > 0 {
		return
	}
	for i, sn := range pim.trash {
		if sn.ID == p.SnapID {
			pim.trash = append(pim.trash[:i], pim.trash[i+1:]...)
			return
		}
	}
}

func (se *session) RenameImage(_ context.Context, ref csi.ImageRef, newName string) error {
	return se.image(ref, func(n *namespace, im *image) error {
		if n.byName(newName) != nil {
			return fmt.Errorf("image %s: %w", newName, csi.ErrExists)
		}
		im.name = newName
		return nil
	})
}

func (se *session) ResizeImage(_ context.Context, ref csi.ImageRef, size uint64) error {
	return se.image(ref, func(_ *namespace, im *image) error {
		im.size = size
		return nil
	})
}

func (se *session) Metadata(_ context.Context, ref csi.ImageRef, key string) (string, error) {
	var v string
	err := se.image(ref, func(_ *namespace, im *image) error {
		var ok bool
		if v, ok = im.meta[key]; !ok {
			return fmt.Errorf("metadata %q of %s: %w", key, im.name, csi.ErrNotFound)
		}
		return nil
	})
	return v, err
}

func (se *session) SetMetadata(_ context.Context, ref csi.ImageRef, key, value string) error {
	return se.image(ref, func(_ *namespace, im *image) error {
		im.meta[key] = value
		return nil
	})
}

func (se *session) CreateSnapshot(_ context.Context, ref csi.ImageRef, name string) error {
	return se.image(ref, func(_ *namespace, im *image) error {
		for _, sn := range im.snaps {
			if sn.Name == name {
				return fmt.Errorf("snapshot %s@%s: %w", im.name, name, csi.ErrExists)
			}
		}
		now := time.Now
		if se.s.Now != nil {
			now = se.s.Now
		}
		im.snaps = append(im.snaps, &csi.SnapInfo{ID: im.nextSnap, Name: name, Size: im.size, Created: now()})
		im.nextSnap++
		return nil
	})
}

// SnapshotExtents reports the whole image as one extent: the fake
// store keeps no data, so every byte may hold some or have changed.
func (se *session) SnapshotExtents(_ context.Context, ref csi.ImageRef, fromSnap, snap string, start uint64, fn func(off, length uint64) error) (uint64, error) {
	var size uint64
	err := se.image(ref, func(_ *namespace, im *image) error {
		found := func(name string) (*csi.SnapInfo, bool) {
			for _, sn := range im.snaps {
				if sn.Name == name {
					return sn, true
				}
			}
			return nil, false
		}
		sn, ok := found(snap)
		if !ok {
			return fmt.Errorf("snapshot %q: %w", snap, csi.ErrNotFound)
		}
		if _, ok := found(fromSnap); fromSnap != "" && !ok {
			return fmt.Errorf("snapshot %q: %w", fromSnap, csi.ErrNotFound)
		}
		size = sn.Size
		return nil
	})
	if err != nil || start >= size {
		return size, err
	}
	return size, fn(start, size-start)
}

func (se *session) ListSnapshots(_ context.Context, ref csi.ImageRef) ([]csi.SnapInfo, error) {
	var out []csi.SnapInfo
	err := se.image(ref, func(_ *namespace, im *image) error {
		for _, sn := range im.snaps {
			out = append(out, *sn)
		}
		return nil
	})
	return out, err
}

func (se *session) RemoveSnapshot(_ context.Context, ref csi.ImageRef, name string) error {
	return se.with(func(c *cluster) error {
		n, err := se.s.ns(se.cluster, ref.Pool, ref.Namespace)
		if err != nil {
			return err
		}
		im := n.byName(ref.Name)
		if ref.Name == "" {
			im = n.images[ref.ID]
		}
		if im == nil {
			return fmt.Errorf("image %q: %w", ref.Name, csi.ErrNotFound)
		}
		for i, sn := range im.snaps {
			if sn.Name != name {
				continue
			}
			if k := c.children(ref.Pool, ref.Namespace, im.id, sn.ID); k > 0 {
				if !se.s.TrashSnapshots {
					return fmt.Errorf("snapshot %s@%s has %d clones: %w", im.name, name, k, csi.ErrBusy)
				}
				im.trash = append(im.trash, sn)
			}
			im.snaps = append(im.snaps[:i], im.snaps[i+1:]...)
			return nil
		}
		return fmt.Errorf("snapshot %s@%s: %w", im.name, name, csi.ErrNotFound)
	})
}

func (se *session) RenameSnapshot(_ context.Context, ref csi.ImageRef, oldName, newName string) error {
	return se.image(ref, func(_ *namespace, im *image) error {
		var found *csi.SnapInfo
		for _, sn := range im.snaps {
			if sn.Name == newName {
				return fmt.Errorf("snapshot %s@%s: %w", im.name, newName, csi.ErrExists)
			}
			if sn.Name == oldName {
				found = sn
			}
		}
		if found == nil {
			return fmt.Errorf("snapshot %s@%s: %w", im.name, oldName, csi.ErrNotFound)
		}
		found.Name = newName
		return nil
	})
}

func (se *session) Reservation(_ context.Context, poolID int64, ns, key string) (string, error) {
	var v string
	err := se.with(func(*cluster) error {
		n, err := se.s.ns(se.cluster, poolID, ns)
		if err != nil {
			return err
		}
		var ok bool
		if v, ok = n.reservations[key]; !ok {
			return fmt.Errorf("reservation %q: %w", key, csi.ErrNotFound)
		}
		return nil
	})
	return v, err
}

func (se *session) SetReservation(_ context.Context, poolID int64, ns, key, value string) error {
	return se.with(func(*cluster) error {
		n, err := se.s.ns(se.cluster, poolID, ns)
		if err != nil {
			return err
		}
		n.reservations[key] = value
		return nil
	})
}

func (se *session) RemoveReservation(_ context.Context, poolID int64, ns, key string) error {
	return se.with(func(*cluster) error {
		n, err := se.s.ns(se.cluster, poolID, ns)
		if err != nil {
			return err
		}
		delete(n.reservations, key)
		return nil
	})
}

// SetOmap sets keys in the omap of a plain RADOS object, creating it: a
// test lays out ceph-csi's journal with it.
func (s *Store) SetOmap(clusterID string, poolID int64, ns, object string, kv map[string]string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, err := s.ns(clusterID, poolID, ns)
	if err != nil {
		return err
	}
	o := n.objects[object]
	if o == nil {
		o = map[string]string{}
		n.objects[object] = o
	}
	for k, v := range kv {
		o[k] = v
	}
	return nil
}

// Omap returns a copy of a plain RADOS object's omap and whether the
// object exists.
func (s *Store) Omap(clusterID string, poolID int64, ns, object string) (map[string]string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, err := s.ns(clusterID, poolID, ns)
	if err != nil {
		return nil, false
	}
	o, ok := n.objects[object]
	return maps.Clone(o), ok
}

func (se *session) OmapValues(_ context.Context, poolID int64, ns, object string, keys []string) (map[string]string, error) {
	out := map[string]string{}
	err := se.with(func(*cluster) error {
		n, err := se.s.ns(se.cluster, poolID, ns)
		if err != nil {
			return err
		}
		o, ok := n.objects[object]
		if !ok {
			return fmt.Errorf("object %s: %w", object, csi.ErrNotFound)
		}
		for _, k := range keys {
			if v, ok := o[k]; ok {
				out[k] = v
			}
		}
		return nil
	})
	return out, err
}

func (se *session) RemoveOmapKeys(_ context.Context, poolID int64, ns, object string, keys []string) error {
	return se.with(func(*cluster) error {
		n, err := se.s.ns(se.cluster, poolID, ns)
		if err != nil {
			return err
		}
		for _, k := range keys {
			delete(n.objects[object], k)
		}
		return nil
	})
}

func (se *session) RemoveObject(_ context.Context, poolID int64, ns, object string) error {
	return se.with(func(*cluster) error {
		n, err := se.s.ns(se.cluster, poolID, ns)
		if err != nil {
			return err
		}
		delete(n.objects, object)
		return nil
	})
}
