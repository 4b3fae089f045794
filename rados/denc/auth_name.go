package denc

import (
	"fmt"
	"strings"
)

// AuthName is Ceph's EntityName: the identity a client or daemon
// authenticates as, such as "client.admin" or "osd.0". Encoded as a u32
// type and a length-prefixed id string.
type AuthName struct {
	Type EntityType
	ID   string
}

// Decode reads an EntityName.
func (n *AuthName) Decode(d *Decoder) {
	n.Type = EntityType(d.U32("EntityName type"))
	n.ID = d.String("EntityName id")
}

// Encode writes an EntityName.
func (n AuthName) Encode(e *Encoder) {
	e.U32(uint32(n.Type))
	e.String(n.ID)
}

// String returns "type.id", for example "client.admin".
func (n AuthName) String() string { return n.Type.String() + "." + n.ID }

// ParseAuthName parses "type.id" ("client.admin", "mon.", "osd.0"): the
// type is everything before the first dot and must be a known type name;
// the id is the rest and may be empty.
func ParseAuthName(s string) (AuthName, error) {
	typ, id, ok := strings.Cut(s, ".")
	if !ok {
		return AuthName{}, fmt.Errorf("denc: auth name %q: want type.id", s)
	}
	t, err := ParseEntityType(typ)
	if err != nil {
		return AuthName{}, fmt.Errorf("denc: auth name %q: %w", s, err)
	}
	return AuthName{Type: t, ID: id}, nil
}
