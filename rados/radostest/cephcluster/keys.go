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

// newKey returns a fresh cephx secret in the base64 form keyrings hold:
// the encoded CryptoKey (type 1 = AES, created utime, u16 length, 16 bytes).
func newKey() (string, error) {
	b := make([]byte, 2+8+2+16)
	binary.LittleEndian.PutUint16(b[0:], 1)
	now := time.Now()
	binary.LittleEndian.PutUint32(b[2:], uint32(now.Unix()))
	binary.LittleEndian.PutUint32(b[6:], uint32(now.Nanosecond()))
	binary.LittleEndian.PutUint16(b[10:], 16)
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
