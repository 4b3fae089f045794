package auth

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/purerbd/purerbd/rados/denc"
)

// KeyringEntry is one entity's section of a keyring.
type KeyringEntry struct {
	Name denc.AuthName
	Key  CryptoKey
	// Caps maps a service ("mon", "osd", ...) to its capability string,
	// as written in "caps mon = ..." lines. Informational only.
	Caps map[string]string
}

// Keyring is a parsed Ceph keyring: sections such as
//
//	[client.admin]
//		key = AQBy...==
//		caps mon = "allow *"
type Keyring struct {
	Entries []KeyringEntry
}

// Key returns the key of name.
func (k *Keyring) Key(name denc.AuthName) (CryptoKey, error) {
	for _, e := range k.Entries {
		if e.Name == name {
			if e.Key.IsZero() {
				return CryptoKey{}, fmt.Errorf("auth: keyring entry %s has no key", name)
			}
			return e.Key, nil
		}
	}
	return CryptoKey{}, fmt.Errorf("auth: no key for %s in keyring", name)
}

// ParseKeyring reads a keyring in Ceph's INI-like format. Lines starting
// with '#' or ';' are comments; "key" and "caps SERVICE" settings are
// understood, others (auid, ...) are ignored.
func ParseKeyring(r io.Reader) (*Keyring, error) {
	kr := &Keyring{}
	var cur *KeyringEntry
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	line := 0
	for sc.Scan() {
		line++
		s := strings.TrimSpace(sc.Text())
		if s == "" || s[0] == '#' || s[0] == ';' {
			continue
		}
		if s[0] == '[' {
			end := strings.IndexByte(s, ']')
			if end < 0 {
				return nil, fmt.Errorf("auth: keyring line %d: unterminated section header", line)
			}
			name, err := ParseName(strings.TrimSpace(s[1:end]))
			if err != nil {
				return nil, fmt.Errorf("auth: keyring line %d: %w", line, err)
			}
			kr.Entries = append(kr.Entries, KeyringEntry{Name: name, Caps: map[string]string{}})
			cur = &kr.Entries[len(kr.Entries)-1]
			continue
		}
		k, v, ok := strings.Cut(s, "=")
		if !ok {
			return nil, fmt.Errorf("auth: keyring line %d: want \"setting = value\"", line)
		}
		if cur == nil {
			return nil, fmt.Errorf("auth: keyring line %d: setting outside a [section]", line)
		}
		k = strings.Join(strings.Fields(k), " ")
		v = strings.TrimSpace(v)
		switch {
		case k == "key":
			key, err := ParseKey(v)
			if err != nil {
				return nil, fmt.Errorf("auth: keyring line %d (%s): %w", line, cur.Name, err)
			}
			cur.Key = key
		case strings.HasPrefix(k, "caps "):
			cur.Caps[strings.TrimPrefix(k, "caps ")] = strings.Trim(v, `"`)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("auth: reading keyring: %w", err)
	}
	return kr, nil
}

// ReadKeyring parses the keyring file at path.
func ReadKeyring(path string) (*Keyring, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("auth: opening keyring: %w", err)
	}
	defer f.Close()
	kr, err := ParseKeyring(f)
	if err != nil {
		return nil, fmt.Errorf("%w (in %s)", err, path)
	}
	return kr, nil
}
