package rbd

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"strconv"
)

// Object names of format 2 images (librbd's util and rbd_types.h).
const (
	directoryObject = "rbd_directory"
	childrenObject  = "rbd_children"
	idPrefix        = "rbd_id."
	headerPrefix    = "rbd_header."
	objectMapPrefix = "rbd_object_map."
	dataPrefix      = "rbd_data."
	// namespaceObject, in a pool's default namespace, records the pool's
	// RBD namespaces as omap keys namespaceKeyPrefix + name.
	namespaceObject    = "rbd_namespace"
	namespaceKeyPrefix = "name_"
	// lockName is the cls lock librbd takes on the header (and on the
	// object map object) for the exclusive lock.
	lockName = "rbd_lock"
	// lockTag marks librbd-managed exclusive locks.
	lockTag = "internal"
	// lockCookiePrefix precedes the watch handle in a managed lock's
	// cookie.
	lockCookiePrefix = "auto "
	// maxImageIDLength is RBD_MAX_IMAGE_ID_LENGTH.
	maxImageIDLength = 14
	// maxNameLength is the longest image name librbd accepts.
	maxNameLength = 96
)

func idObject(name string) string   { return idPrefix + name }
func headerObject(id string) string { return headerPrefix + id }

// objectMapObject names the object map of the head (snap = NoSnap) or of
// a snapshot.
func objectMapObject(id string, snap uint64) string {
	if snap == noSnap {
		return objectMapPrefix + id
	}
	return fmt.Sprintf("%s%s.%016x", objectMapPrefix, id, snap)
}

// lockCookie is librbd's encode_lock_cookie.
func lockCookie(watchHandle uint64) string {
	return lockCookiePrefix + strconv.FormatUint(watchHandle, 10)
}

// parseLockCookie is librbd's decode_lock_cookie.
func parseLockCookie(cookie string) (uint64, bool) {
	if len(cookie) <= len(lockCookiePrefix) || cookie[:len(lockCookiePrefix)] != lockCookiePrefix {
		return 0, false
	}
	h, err := strconv.ParseUint(cookie[len(lockCookiePrefix):], 10, 64)
	return h, err == nil
}

// newImageID generates an image id as librbd does: the client's global
// id in hex followed by 32 random bits in hex, keeping the last 14
// characters.
func newImageID(instanceID uint64) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	id := strconv.FormatUint(instanceID, 16) + strconv.FormatUint(uint64(binary.LittleEndian.Uint32(b[:])), 16)
	if len(id) > maxImageIDLength {
		id = id[len(id)-maxImageIDLength:]
	}
	return id
}
