package genl

import (
	"context"
	"errors"
	"fmt"
	"syscall"

	"golang.org/x/sys/unix"
)

// Controller commands and attributes (include/uapi/linux/genetlink.h).
const (
	ctrlVersion      = 2
	ctrlCmdGetFamily = 3

	ctrlAttrFamilyID    = 1
	ctrlAttrFamilyName  = 2
	ctrlAttrVersion     = 3
	ctrlAttrHdrSize     = 4
	ctrlAttrMaxAttr     = 5
	ctrlAttrOps         = 6
	ctrlAttrMcastGroups = 7

	ctrlAttrOpID    = 1
	ctrlAttrOpFlags = 2

	ctrlAttrMcastGrpName = 1
	ctrlAttrMcastGrpID   = 2
)

// ErrFamilyNotFound is returned by ResolveFamily when the kernel has no
// family of that name (for nbd: the module is not loaded).
var ErrFamilyNotFound = errors.New("genl: family not registered")

// Family describes a registered generic netlink family.
type Family struct {
	ID         uint16
	Name       string
	Version    uint32
	HeaderSize uint32
	// MaxAttr is the highest attribute type the family's policy knows:
	// attributes above it are ignored by the kernel.
	MaxAttr uint32
	Ops     []Op
	Groups  []MulticastGroup
}

// Op is a command a family supports.
type Op struct {
	ID    uint32
	Flags uint32
}

// MulticastGroup is a family's multicast group.
type MulticastGroup struct {
	ID   uint32
	Name string
}

// HasOp reports whether the family lists command cmd.
func (f Family) HasOp(cmd uint32) bool {
	for _, op := range f.Ops {
		if op.ID == cmd {
			return true
		}
	}
	return false
}

// ResolveFamily asks the controller about the family called name.
func (c *Conn) ResolveFamily(ctx context.Context, name string) (Family, error) {
	var e Encoder
	e.String(ctrlAttrFamilyName, name)
	attrs, err := e.Bytes()
	if err != nil {
		return Family{}, err
	}
	msgs, err := c.Execute(ctx, Request{Family: unix.GENL_ID_CTRL, Cmd: ctrlCmdGetFamily, Version: ctrlVersion, Attrs: attrs})
	if err != nil {
		if errors.Is(err, syscall.ENOENT) {
			return Family{}, fmt.Errorf("%w: %q", ErrFamilyNotFound, name)
		}
		return Family{}, fmt.Errorf("genl: resolve family %q: %w", name, err)
	}
	if len(msgs) != 1 {
		return Family{}, fmt.Errorf("genl: resolve family %q: %d replies, want 1", name, len(msgs))
	}
	f, err := ParseFamily(msgs[0])
	if err != nil {
		return Family{}, fmt.Errorf("genl: resolve family %q: %w", name, err)
	}
	if f.Name != name {
		return Family{}, fmt.Errorf("genl: resolve family %q: the controller answered for %q", name, f.Name)
	}
	return f, nil
}

// ParseFamily decodes the controller's answer to CTRL_CMD_GETFAMILY.
func ParseFamily(m Message) (Family, error) {
	g, err := m.Genl()
	if err != nil {
		return Family{}, err
	}
	attrs, err := ParseAttrs(g.Attrs)
	if err != nil {
		return Family{}, err
	}
	var f Family
	var haveID bool
	for _, a := range attrs {
		switch a.Type {
		case ctrlAttrFamilyID:
			if f.ID, err = a.Uint16(); err != nil {
				return Family{}, err
			}
			haveID = true
		case ctrlAttrFamilyName:
			f.Name = a.String()
		case ctrlAttrVersion:
			if f.Version, err = a.Uint32(); err != nil {
				return Family{}, err
			}
		case ctrlAttrHdrSize:
			if f.HeaderSize, err = a.Uint32(); err != nil {
				return Family{}, err
			}
		case ctrlAttrMaxAttr:
			if f.MaxAttr, err = a.Uint32(); err != nil {
				return Family{}, err
			}
		case ctrlAttrOps:
			if f.Ops, err = parseOps(a); err != nil {
				return Family{}, err
			}
		case ctrlAttrMcastGroups:
			if f.Groups, err = parseGroups(a); err != nil {
				return Family{}, err
			}
		}
	}
	if !haveID {
		return Family{}, errors.New("genl: family reply without CTRL_ATTR_FAMILY_ID")
	}
	return f, nil
}

func parseOps(a Attr) ([]Op, error) {
	items, err := a.Attrs()
	if err != nil {
		return nil, err
	}
	ops := make([]Op, 0, len(items))
	for _, it := range items {
		fields, err := it.Attrs()
		if err != nil {
			return nil, err
		}
		var op Op
		for _, fl := range fields {
			switch fl.Type {
			case ctrlAttrOpID:
				op.ID, err = fl.Uint32()
			case ctrlAttrOpFlags:
				op.Flags, err = fl.Uint32()
			}
			if err != nil {
				return nil, err
			}
		}
		ops = append(ops, op)
	}
	return ops, nil
}

func parseGroups(a Attr) ([]MulticastGroup, error) {
	items, err := a.Attrs()
	if err != nil {
		return nil, err
	}
	groups := make([]MulticastGroup, 0, len(items))
	for _, it := range items {
		fields, err := it.Attrs()
		if err != nil {
			return nil, err
		}
		var g MulticastGroup
		for _, fl := range fields {
			switch fl.Type {
			case ctrlAttrMcastGrpName:
				g.Name = fl.String()
			case ctrlAttrMcastGrpID:
				if g.ID, err = fl.Uint32(); err != nil {
					return nil, err
				}
			}
		}
		groups = append(groups, g)
	}
	return groups, nil
}
