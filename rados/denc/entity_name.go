package denc

import (
	"fmt"
	"strconv"
	"strings"
)

// EntityType is Ceph's entity type (CEPH_ENTITY_TYPE_*): a bit per kind of
// daemon or client. entity_name_t carries it as a u8, EntityName (here
// AuthName) as a u32.
type EntityType uint32

// Entity types.
const (
	EntityTypeMon    EntityType = 0x01
	EntityTypeMDS    EntityType = 0x02
	EntityTypeOSD    EntityType = 0x04
	EntityTypeClient EntityType = 0x08
	EntityTypeMgr    EntityType = 0x10
	EntityTypeAuth   EntityType = 0x20
	EntityTypeAny    EntityType = 0xff
)

// String returns Ceph's name for t ("mon", "osd", "client"...), or
// "unknown" as Ceph prints it.
func (t EntityType) String() string {
	switch t {
	case EntityTypeMon:
		return "mon"
	case EntityTypeMDS:
		return "mds"
	case EntityTypeOSD:
		return "osd"
	case EntityTypeClient:
		return "client"
	case EntityTypeMgr:
		return "mgr"
	case EntityTypeAuth:
		return "auth"
	}
	return "unknown"
}

// ParseEntityType maps Ceph's type names back to types.
func ParseEntityType(s string) (EntityType, error) {
	switch s {
	case "mon":
		return EntityTypeMon, nil
	case "mds":
		return EntityTypeMDS, nil
	case "osd":
		return EntityTypeOSD, nil
	case "client":
		return EntityTypeClient, nil
	case "mgr":
		return EntityTypeMgr, nil
	case "auth":
		return EntityTypeAuth, nil
	}
	return 0, fmt.Errorf("denc: unknown entity type %q", s)
}

// EntityNameNew is the number of an entity that has not been assigned one
// yet (Ceph's entity_name_t::NEW).
const EntityNameNew int64 = -1

// EntityName is Ceph's entity_name_t: an entity type and a number, the
// identity of a daemon or a client session on the wire ("client.4123",
// "osd.0"). Encoded as u8 type and i64 number. Not to be confused with
// Ceph's EntityName, the authentication identity, which is AuthName here.
type EntityName struct {
	Type EntityType
	Num  int64
}

// Decode reads an entity_name_t.
func (n *EntityName) Decode(d *Decoder) {
	n.Type = EntityType(d.U8("entity_name_t type"))
	n.Num = d.I64("entity_name_t num")
}

// Encode writes an entity_name_t.
func (n EntityName) Encode(e *Encoder) {
	e.U8(uint8(n.Type))
	e.I64(n.Num)
}

// String formats n as Ceph does: "client.4123", or "client.?" for a
// negative (not yet assigned) number.
func (n EntityName) String() string {
	if n.Num < 0 {
		return n.Type.String() + ".?"
	}
	return n.Type.String() + "." + strconv.FormatInt(n.Num, 10)
}

// ParseEntityName parses "type.num" ("osd.3", "client.4123"). Only the
// types Ceph's parser accepts (mon, osd, mds, client, mgr) are allowed.
func ParseEntityName(s string) (EntityName, error) {
	typ, num, ok := strings.Cut(s, ".")
	if !ok {
		return EntityName{}, fmt.Errorf("denc: entity name %q: want type.num", s)
	}
	t, err := ParseEntityType(typ)
	if err != nil || t == EntityTypeAuth {
		return EntityName{}, fmt.Errorf("denc: entity name %q: unknown type %q", s, typ)
	}
	v, err := strconv.ParseInt(num, 10, 64)
	if err != nil {
		return EntityName{}, fmt.Errorf("denc: entity name %q: bad number: %w", s, err)
	}
	return EntityName{Type: t, Num: v}, nil
}
