package rbdstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/purerbd/purerbd/csi"
	"github.com/purerbd/purerbd/rados"
	"github.com/purerbd/purerbd/rbd"
)

// RBD groups for the controller's VolumeGroupSnapshots, on package rbd's
// group API (librbd's api::Group on disk).

func (s *session) CreateGroup(ctx context.Context, g csi.GroupRef) error {
	if err := s.checkNamespace(ctx, g.Pool, g.Namespace); err != nil {
		return err
	}
	io, err := s.ioctx(ctx, g.Pool, g.Namespace)
	if err != nil {
		return err
	}
	return mapErr(rbd.CreateGroup(ctx, io, g.Name))
}

func (s *session) ListGroups(ctx context.Context, pool int64, ns string) ([]string, error) {
	io, err := s.ioctx(ctx, pool, ns)
	if err != nil {
		return nil, err
	}
	names, err := rbd.ListGroups(ctx, io)
	return names, mapErr(err)
}

func (s *session) RemoveGroup(ctx context.Context, g csi.GroupRef) error {
	io, err := s.ioctx(ctx, g.Pool, g.Namespace)
	if err != nil {
		return err
	}
	return mapErr(rbd.RemoveGroup(ctx, io, g.Name))
}

func (s *session) AddGroupImage(ctx context.Context, g csi.GroupRef, img csi.ImageRef) error {
	gio, err := s.ioctx(ctx, g.Pool, g.Namespace)
	if err != nil {
		return err
	}
	iio, name, err := s.namedImage(ctx, img)
	if err != nil {
		return err
	}
	return mapErr(rbd.AddGroupImage(ctx, gio, g.Name, iio, name))
}

func (s *session) RemoveGroupImage(ctx context.Context, g csi.GroupRef, img csi.ImageRef) error {
	gio, err := s.ioctx(ctx, g.Pool, g.Namespace)
	if err != nil {
		return err
	}
	iio, err := s.ioctx(ctx, img.Pool, img.Namespace)
	if err != nil {
		return err
	}
	if img.Name == "" {
		return mapErr(rbd.RemoveGroupImageByID(ctx, gio, g.Name, iio, img.ID))
	}
	return mapErr(rbd.RemoveGroupImage(ctx, gio, g.Name, iio, img.Name))
}

func (s *session) ImageGroup(ctx context.Context, img csi.ImageRef) (csi.GroupRef, bool, error) {
	var g csi.GroupRef
	var ok bool
	err := s.open(ctx, img, true, func(im *rbd.Image) error {
		ig, in, err := im.Group(ctx)
		if err != nil || !in {
			return err
		}
		g, ok = csi.GroupRef{Pool: ig.PoolID, Namespace: img.Namespace, Name: ig.Name}, true
		return nil
	})
	return g, ok, err
}

func (s *session) GroupImages(ctx context.Context, g csi.GroupRef) ([]csi.ImageRef, error) {
	io, err := s.ioctx(ctx, g.Pool, g.Namespace)
	if err != nil {
		return nil, err
	}
	members, err := rbd.GroupImages(ctx, io, g.Name)
	if err != nil {
		return nil, mapErr(err)
	}
	out := make([]csi.ImageRef, len(members))
	for i, m := range members {
		out[i] = csi.ImageRef{Pool: m.PoolID, Namespace: m.Namespace, Name: m.Name, ID: m.ID}
	}
	return out, nil
}

func (s *session) GroupSnapshots(ctx context.Context, g csi.GroupRef) ([]csi.GroupSnapInfo, error) {
	io, err := s.ioctx(ctx, g.Pool, g.Namespace)
	if err != nil {
		return nil, err
	}
	snaps, err := rbd.GroupSnapshots(ctx, io, g.Name)
	if err != nil {
		return nil, mapErr(err)
	}
	out := make([]csi.GroupSnapInfo, len(snaps))
	for i, gs := range snaps {
		out[i] = csi.GroupSnapInfo{ID: gs.ID, Name: gs.Name, Complete: gs.State == rbd.GroupSnapComplete}
		for _, m := range gs.Images {
			out[i].Members = append(out[i].Members, csi.GroupSnapMember{Pool: m.PoolID, ImageID: m.ImageID, SnapID: m.SnapID})
		}
	}
	return out, nil
}

func (s *session) CreateGroupSnapshot(ctx context.Context, g csi.GroupRef, snap string) error {
	io, err := s.ioctx(ctx, g.Pool, g.Namespace)
	if err != nil {
		return err
	}
	return mapErr(rbd.CreateGroupSnapshot(ctx, io, g.Name, snap))
}

func (s *session) RemoveGroupSnapshot(ctx context.Context, g csi.GroupRef, snap string) error {
	io, err := s.ioctx(ctx, g.Pool, g.Namespace)
	if err != nil {
		return err
	}
	return mapErr(rbd.RemoveGroupSnapshot(ctx, io, g.Name, snap))
}

// GroupMemberSnapshots names each member snapshot's group and group
// snapshot; one whose group or group snapshot is gone (a removal cut
// short) is left out.
func (s *session) GroupMemberSnapshots(ctx context.Context, img csi.ImageRef) ([]csi.SnapInfo, error) {
	var out []csi.SnapInfo
	err := s.open(ctx, img, true, func(im *rbd.Image) error {
		snaps, err := im.Snapshots(ctx)
		if err != nil {
			return err
		}
		for _, sn := range snaps {
			if sn.Namespace != rbd.SnapNamespaceGroup || sn.Group == nil {
				continue
			}
			group, gsnap, err := im.GroupSnapshotOf(ctx, sn)
			if err != nil {
				if errors.Is(err, rbd.ErrNotFound) {
					continue
				}
				return fmt.Errorf("group of snapshot %d: %w", sn.ID, err)
			}
			out = append(out, csi.SnapInfo{ID: sn.ID, Name: sn.Name, Size: uint64(sn.Size), Created: sn.Timestamp,
				Group: &csi.SnapGroup{Group: csi.GroupRef{Pool: sn.Group.PoolID, Namespace: img.Namespace, Name: group}, GroupSnap: gsnap}})
		}
		return nil
	})
	return out, err
}

func (s *session) CloneImageFromSnapID(ctx context.Context, parent csi.ImageRef, snapID uint64, child csi.ImageRef, opts csi.ImageOptions) error {
	return s.clone(ctx, parent, child, opts, func(pio *rados.IOContext, parentName string, cio *rados.IOContext, co rbd.CreateOptions) error {
		return rbd.CloneFromSnapID(ctx, pio, parentName, snapID, cio, child.Name, co)
	})
}
