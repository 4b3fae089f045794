package auth

import (
	"fmt"
	"strings"

	"github.com/purerbd/purerbd/rados/denc"
)

// ParseName parses an authentication identity the way Ceph tools accept
// it: "client.admin", "osd.0", or a bare id such as "admin", which means
// client.admin (like the --id option of the ceph CLI).
func ParseName(s string) (denc.AuthName, error) {
	if s == "" {
		return denc.AuthName{}, fmt.Errorf("auth: empty entity name")
	}
	if typ, _, ok := strings.Cut(s, "."); ok {
		if _, err := denc.ParseEntityType(typ); err == nil {
			n, err := denc.ParseAuthName(s)
			if err != nil {
				return denc.AuthName{}, fmt.Errorf("auth: entity name %q: %w", s, err)
			}
			return n, nil
		}
	}
	return denc.AuthName{Type: denc.EntityTypeClient, ID: s}, nil
}
