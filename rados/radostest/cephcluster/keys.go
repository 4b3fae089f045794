package cephcluster

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"os"
	"strings"
	"time"
)

// Cephx key types (CEPH_CRYPTO_*) a cluster's keys are made with.
const (
	keyTypeAES     = 1 // 16-byte secret; the only type before Tentacle
	keyTypeAES256K = 2 // 32-byte secret; Tentacle's default and, fresh, its only allowed type
)

// newKey returns a fresh cephx secret of the given type in the base64
// form keyrings hold: the encoded CryptoKey (type, created utime, u16
// length, secret).
func newKey(typ uint16) (string, error) {
	n := 16
	if typ == keyTypeAES256K {
		n = 32
	}
	b := make([]byte, 2+8+2+n)
	binary.LittleEndian.PutUint16(b[0:], typ)
	now := time.Now()
	binary.LittleEndian.PutUint32(b[2:], uint32(now.Unix()))
	binary.LittleEndian.PutUint32(b[6:], uint32(now.Nanosecond()))
	binary.LittleEndian.PutUint16(b[10:], uint16(n))
	if _, err := rand.Read(b[12:]); err != nil {
		return "", fmt.Errorf("cephcluster: random key: %w", err)
	}
	return base64.StdEncoding.EncodeToString(b), nil
}

// keyringEntry is one section of a keyring file.
type keyringEntry struct {
	name string
	key  string
	caps [][2]string // service, cap
}

func writeKeyring(path string, entries ...keyringEntry) error {
	var sb strings.Builder
	for _, e := range entries {
		fmt.Fprintf(&sb, "[%s]\n\tkey = %s\n", e.name, e.key)
		for _, c := range e.caps {
			fmt.Fprintf(&sb, "\tcaps %s = \"%s\"\n", c[0], c[1])
		}
	}
	if err := os.WriteFile(path, []byte(sb.String()), 0o600); err != nil {
		return fmt.Errorf("cephcluster: keyring: %w", err)
	}
	return nil
}

// allCaps are the capabilities of client.admin.
func allCaps() [][2]string {
	return [][2]string{{"mon", "allow *"}, {"osd", "allow *"}, {"mds", "allow *"}, {"mgr", "allow *"}}
}

// keyType is the type of the keys this cluster makes: what a fresh
// cluster of its release would make itself.
func (c *Cluster) keyType() uint16 {
	if c.Options.Release == ReleaseTentacle {
		return keyTypeAES256K
	}
	return keyTypeAES
}
