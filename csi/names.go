package csi

// Naming of images and snapshots.
//
// Idempotency rests on deterministic names: the image behind CSI volume
// name N is volumeNamePrefix + H(N) and the RBD snapshot behind CSI
// snapshot name N is snapshotNamePrefix + H(N), where H is the first 32
// hex digits (128 bits) of SHA-256. A retried CreateVolume therefore finds
// the image its earlier attempt made, whatever state that attempt left.
// The image also records N in its metadata (metaName, written last, so it
// doubles as the "creation finished" mark) and the content source it was
// made from (metaSource).
//
// RBD snapshot names are unique per image only, while CSI snapshot names
// are unique per plugin. A reservation table per pool and namespace (see
// Session.Reservation) maps the RBD snapshot name to the ID of the image
// that holds it, so a second CreateSnapshot with the same name and another
// source volume is refused with ALREADY_EXISTS.
//
// Snapshots taken internally to clone a volume (CLONE_VOLUME) are named
// cloneSnapPrefix + H(target pool/namespace/image); the prefix is reserved.
//
// Deleting a volume that still has snapshots (its own CSI snapshots, or
// snapshots that clones depend on) renames the image to
// NAME + tombstoneSep + IMAGEID, out of the way of its CSI name, and it is
// removed when its last snapshot goes. Likewise a CSI snapshot that clones
// still depend on is renamed NAME + tombstoneSep + SNAPID and removed with
// its last clone. Tombstones never show in ListVolumes or ListSnapshots.

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
)

const (
	defaultVolumePrefix   = "csi-vol-"
	defaultSnapshotPrefix = "csi-snap-"
	cloneSnapPrefix       = "purerbd-clone-"
	tombstoneSep          = "-deleted-"
	hashLen               = 32
	maxPrefixLen          = 64

	metaName   = "purerbd.csi.name"
	metaSource = "purerbd.csi.source"
)

// nameHash is the part of image and snapshot names derived from a CSI name.
func nameHash(name string) string {
	sum := sha256.Sum256([]byte(name))
	return hex.EncodeToString(sum[:])[:hashLen]
}

func volumeImageName(prefix, csiName string) string { return prefix + nameHash(csiName) }

func snapshotName(prefix, csiName string) string { return prefix + nameHash(csiName) }

func cloneSnapName(target ImageRef) string {
	return cloneSnapPrefix + nameHash(fmt.Sprintf("%d/%s/%s", target.Pool, target.Namespace, target.Name))
}

func imageTombstone(name, id string) string { return name + tombstoneSep + id }

func snapTombstone(name string, id uint64) string {
	return name + tombstoneSep + strconv.FormatUint(id, 10)
}

// liveName strips a tombstone suffix: the name the object had while alive.
func liveName(name string) string {
	if i := strings.Index(name, tombstoneSep); i >= 0 {
		return name[:i]
	}
	return name
}

// isManagedName reports whether name has the shape of one this driver
// makes: a valid prefix and a 32-digit hash, not a tombstone nor an
// internal snapshot. The shape alone proves nothing (see ownership.go).
func isManagedName(name string) bool {
	if len(name) < hashLen || strings.Contains(name, tombstoneSep) || strings.HasPrefix(name, cloneSnapPrefix) {
		return false
	}
	prefix := name[:len(name)-hashLen]
	return isHex(name[len(name)-hashLen:]) && len(prefix) <= maxPrefixLen && validPrefixChars(prefix)
}

// isHex reports whether s is lowercase hexadecimal, as nameHash writes it.
func isHex(s string) bool {
	for _, c := range s {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// validPrefixChars reports whether p uses only the characters a name
// prefix may hold.
func validPrefixChars(p string) bool {
	for _, c := range p {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

// checkPrefix validates a volumeNamePrefix or snapshotNamePrefix.
func checkPrefix(param, p string) error {
	if len(p) > maxPrefixLen {
		return fmt.Errorf("%s %q is longer than %d bytes", param, p, maxPrefixLen)
	}
	if !validPrefixChars(p) {
		return fmt.Errorf("%s %q: only letters, digits, '-', '_' and '.' are allowed", param, p)
	}
	if strings.HasPrefix(p, cloneSnapPrefix) {
		return fmt.Errorf("%s %q: the prefix %q is reserved", param, p, cloneSnapPrefix)
	}
	if strings.Contains(p, tombstoneSep) {
		return fmt.Errorf("%s %q: %q is reserved", param, p, tombstoneSep)
	}
	return nil
}
