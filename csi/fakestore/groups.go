package fakestore

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/purerbd/purerbd/csi"
)

// RBD groups as the fake keeps them: a group of a namespace holds member
// images of that namespace and group snapshots, whose member snapshots
// live on the images beside (not among) their user snapshots, named as
// librbd names them.

type group struct {
	id, name string
	pool     int64
	members  []*image
	snaps    []*groupSnap
}

type groupSnap struct {
	id, name string
	complete bool
	members  []csi.GroupSnapMember
}

// CrashNextGroupSnapshot makes the next CreateGroupSnapshot stop as a
// crashed client would: the group snapshot recorded incomplete and only
// the first member snapshotted.
func (s *Store) CrashNextGroupSnapshot() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.crashGroupSnap = true
}

// Groups lists the groups of a namespace with their snapshots, as
// "GROUP" and "GROUP@SNAP" ("GROUP@SNAP(incomplete)"), sorted.
func (s *Store) Groups(clusterID string, poolID int64, ns string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	n, err := s.ns(clusterID, poolID, ns)
	if err != nil {
		return nil
	}
	for _, g := range n.groups {
		out = append(out, g.name)
		for _, gs := range g.snaps {
			suffix := ""
			if !gs.complete {
				suffix = "(incomplete)"
			}
			out = append(out, g.name+"@"+gs.name+suffix)
		}
	}
	sort.Strings(out)
	return out
}

// group runs f on a group found by name.
func (se *session) group(g csi.GroupRef, f func(n *namespace, gr *group) error) error {
	return se.with(func(*cluster) error {
		n, err := se.s.ns(se.cluster, g.Pool, g.Namespace)
		if err != nil {
			return err
		}
		gr := n.groups[g.Name]
		if gr == nil {
			return fmt.Errorf("group %q: %w", g.Name, csi.ErrNotFound)
		}
		return f(n, gr)
	})
}

func (se *session) CreateGroup(_ context.Context, g csi.GroupRef) error {
	return se.with(func(*cluster) error {
		n, err := se.s.ns(se.cluster, g.Pool, g.Namespace)
		if err != nil {
			return err
		}
		if n.groups[g.Name] != nil {
			return fmt.Errorf("group %q: %w", g.Name, csi.ErrExists)
		}
		se.s.nextID++
		n.groups[g.Name] = &group{id: fmt.Sprintf("%x", 0x2000000+se.s.nextID), name: g.Name, pool: g.Pool}
		return nil
	})
}

func (se *session) ListGroups(_ context.Context, poolID int64, ns string) ([]string, error) {
	var names []string
	err := se.with(func(*cluster) error {
		n, err := se.s.ns(se.cluster, poolID, ns)
		if err != nil {
			return err
		}
		for name := range n.groups {
			names = append(names, name)
		}
		sort.Strings(names)
		return nil
	})
	return names, err
}

func (se *session) RemoveGroup(_ context.Context, g csi.GroupRef) error {
	return se.group(g, func(n *namespace, gr *group) error {
		for _, gs := range gr.snaps {
			se.removeGroupSnap(gr, gs)
		}
		for _, im := range gr.members {
			im.group = nil
		}
		delete(n.groups, g.Name)
		return nil
	})
}

// member finds an image of the group's namespace; the store lock is held.
func (se *session) member(g csi.GroupRef, img csi.ImageRef) (*image, error) {
	if img.Namespace != g.Namespace {
		return nil, fmt.Errorf("image and group namespaces differ (%q, %q): %w", img.Namespace, g.Namespace, csi.ErrUnsupported)
	}
	n, err := se.s.ns(se.cluster, img.Pool, img.Namespace)
	if err != nil {
		return nil, err
	}
	im := n.images[img.ID]
	if img.Name != "" {
		im = n.byName(img.Name)
	}
	if im == nil {
		return nil, fmt.Errorf("image %q (id %q): %w", img.Name, img.ID, csi.ErrNotFound)
	}
	return im, nil
}

func (se *session) AddGroupImage(_ context.Context, g csi.GroupRef, img csi.ImageRef) error {
	return se.group(g, func(_ *namespace, gr *group) error {
		im, err := se.member(g, img)
		if err != nil {
			return err
		}
		switch im.group {
		case gr:
			return nil
		case nil:
			im.group = gr
			gr.members = append(gr.members, im)
			return nil
		}
		return fmt.Errorf("image %s is in group %s: %w", im.name, im.group.name, csi.ErrInGroup)
	})
}

func (se *session) RemoveGroupImage(_ context.Context, g csi.GroupRef, img csi.ImageRef) error {
	return se.group(g, func(_ *namespace, gr *group) error {
		im, err := se.member(g, img)
		if err != nil {
			return err
		}
		if im.group == nil {
			return nil
		}
		if im.group != gr {
			return fmt.Errorf("image %s is in another group: %w", im.name, csi.ErrUnsupported)
		}
		im.group = nil
		gr.members = slices.DeleteFunc(gr.members, func(m *image) bool { return m == im })
		return nil
	})
}

func (se *session) ImageGroup(_ context.Context, ref csi.ImageRef) (csi.GroupRef, bool, error) {
	var g csi.GroupRef
	var ok bool
	err := se.image(ref, func(_ *namespace, im *image) error {
		if im.group != nil {
			g, ok = csi.GroupRef{Pool: im.group.pool, Namespace: ref.Namespace, Name: im.group.name}, true
		}
		return nil
	})
	return g, ok, err
}

func (se *session) GroupImages(_ context.Context, g csi.GroupRef) ([]csi.ImageRef, error) {
	var out []csi.ImageRef
	err := se.group(g, func(_ *namespace, gr *group) error {
		for _, im := range gr.members {
			out = append(out, csi.ImageRef{Pool: gr.pool, Namespace: g.Namespace, Name: im.name, ID: im.id})
		}
		return nil
	})
	return out, err
}

func (se *session) GroupSnapshots(_ context.Context, g csi.GroupRef) ([]csi.GroupSnapInfo, error) {
	var out []csi.GroupSnapInfo
	err := se.group(g, func(_ *namespace, gr *group) error {
		for _, gs := range gr.snaps {
			out = append(out, csi.GroupSnapInfo{ID: gs.id, Name: gs.name, Complete: gs.complete, Members: slices.Clone(gs.members)})
		}
		return nil
	})
	return out, err
}

// memberSnapName is librbd's name for a member snapshot.
func memberSnapName(gr *group, gs *groupSnap) string {
	return fmt.Sprintf(".group.%x_%s_%s", gr.pool, gr.id, gs.id)
}

func (se *session) CreateGroupSnapshot(_ context.Context, g csi.GroupRef, snap string) error {
	return se.group(g, func(_ *namespace, gr *group) error {
		for _, gs := range gr.snaps {
			if gs.name == snap {
				return fmt.Errorf("group snapshot %s@%s: %w", g.Name, snap, csi.ErrExists)
			}
		}
		se.s.nextID++
		gs := &groupSnap{id: fmt.Sprintf("%x", 0x3000000+se.s.nextID), name: snap}
		gr.snaps = append(gr.snaps, gs)
		now := time.Now
		if se.s.Now != nil {
			now = se.s.Now
		}
		name := memberSnapName(gr, gs)
		for i, im := range gr.members {
			if se.s.crashGroupSnap && i == 1 {
				se.s.crashGroupSnap = false
				return fmt.Errorf("group snapshot %s@%s: the client crashed (injected): %w", g.Name, snap, csi.ErrUnavailable)
			}
			sn := &csi.SnapInfo{ID: im.nextSnap, Name: name, Size: im.size, Created: now(),
				Group: &csi.SnapGroup{Group: csi.GroupRef{Pool: gr.pool, Namespace: g.Namespace, Name: gr.name}, GroupSnap: snap}}
			im.nextSnap++
			im.gsnaps = append(im.gsnaps, sn)
			gs.members = append(gs.members, csi.GroupSnapMember{Pool: gr.pool, ImageID: im.id, SnapID: sn.ID})
		}
		gs.complete = true
		return nil
	})
}

// removeGroupSnap removes a group snapshot's member snapshots (to the
// trash while clones need them) and its record; the store lock is held.
func (se *session) removeGroupSnap(gr *group, gs *groupSnap) {
	c := se.s.clusters[se.cluster]
	name := memberSnapName(gr, gs)
	for pid, p := range c.pools {
		for nsName, n := range p.namespaces {
			for _, im := range n.images {
				im.gsnaps = slices.DeleteFunc(im.gsnaps, func(sn *csi.SnapInfo) bool {
					if sn.Name != name {
						return false
					}
					if c.children(pid, nsName, im.id, sn.ID) > 0 {
						im.trash = append(im.trash, sn)
					}
					return true
				})
			}
		}
	}
	gr.snaps = slices.DeleteFunc(gr.snaps, func(x *groupSnap) bool { return x == gs })
}

func (se *session) RemoveGroupSnapshot(_ context.Context, g csi.GroupRef, snap string) error {
	return se.group(g, func(_ *namespace, gr *group) error {
		for _, gs := range gr.snaps {
			if gs.name == snap {
				se.removeGroupSnap(gr, gs)
				return nil
			}
		}
		return fmt.Errorf("group snapshot %s@%s: %w", g.Name, snap, csi.ErrNotFound)
	})
}

func (se *session) GroupMemberSnapshots(_ context.Context, ref csi.ImageRef) ([]csi.SnapInfo, error) {
	var out []csi.SnapInfo
	err := se.image(ref, func(_ *namespace, im *image) error {
		for _, sn := range im.gsnaps {
			c := *sn
			g := *sn.Group
			c.Group = &g
			out = append(out, c)
		}
		return nil
	})
	return out, err
}

func (se *session) CloneImageFromSnapID(_ context.Context, parent csi.ImageRef, snapID uint64, child csi.ImageRef, opts csi.ImageOptions) error {
	return se.with(func(c *cluster) error {
		pn, err := se.s.ns(se.cluster, parent.Pool, parent.Namespace)
		if err != nil {
			return err
		}
		pim := pn.images[parent.ID]
		if parent.Name != "" {
			pim = pn.byName(parent.Name)
		}
		if pim == nil {
			return fmt.Errorf("parent image %q: %w", parent.Name, csi.ErrNotFound)
		}
		var sn *csi.SnapInfo
		for _, x := range slices.Concat(pim.snaps, pim.gsnaps) {
			if x.ID == snapID {
				sn = x
			}
		}
		if sn == nil {
			return fmt.Errorf("parent snapshot %s@{id %d}: %w", pim.name, snapID, csi.ErrNotFound)
		}
		return se.cloneSnap(c, parent, pim, sn, child, opts)
	})
}
