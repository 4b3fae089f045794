package csi

// Ownership. Pools are often shared with images and snapshots the driver
// never made (VM disks, other CSI drivers, an operator's own snapshots),
// so the controller acts only on what is provably its own. An image is
// the driver's when both hold:
//
//   - its name follows the driver's grammar: a managed name (a prefix and
//     32 hex digits), or the tombstone of one whose suffix is exactly the
//     image's own ID;
//   - its metadata carries the ownership record metaName, and the 32 hex
//     digits of the name are the hash of the CSI name recorded there.
//
// metaName is written when CreateVolume finishes, so an image whose
// creation was interrupted is not owned yet: only a retried CreateVolume,
// which derives the same name from the CO's own request, touches it.
//
// An image ceph-csi made is the driver's too when ceph-csi's journal
// says so (cephcsi_adopt.go): its name, or its tombstone's live name, is
// PREFIX + UUID and the journal object of that UUID in its pool and
// namespace names exactly this image.
//
// A snapshot is removed only if its image is owned and its name is an
// internal clone snapshot (cloneSnapPrefix and 32 hex digits) or the
// tombstone of a managed snapshot name whose suffix is the snapshot's own
// ID. Everything else is left alone, whatever it is called.

import (
	"context"
	"errors"
	"strconv"
	"strings"
)

// imageLiveName parses an image name against the driver's grammar: the
// managed name it has or had while alive, and whether it is a tombstone
// (NAME + tombstoneSep + id, with id the image's own ID).
func imageLiveName(name, id string) (live string, tomb, ok bool) {
	if id != "" {
		if l, found := strings.CutSuffix(name, tombstoneSep+id); found {
			return l, true, isManagedName(l)
		}
	}
	return name, false, isManagedName(name)
}

// hasManagedShape tells whether a listed image name can be the driver's
// before its ID is known: a managed name, or one followed by
// tombstoneSep and something. Scans use it to skip foreign images
// without reading them.
func hasManagedShape(name string) bool {
	if i := strings.Index(name, tombstoneSep); i >= 0 {
		return isManagedName(name[:i]) && len(name) > i+len(tombstoneSep)
	}
	return isManagedName(name)
}

// owner is an image the driver has checked is its own.
type owner struct {
	info ImageInfo
	ref  ImageRef // by name
	tomb bool     // a tombstone of a deleted volume
	// cephcsi is the journal entry of an image ceph-csi made, nil for
	// the driver's own.
	cephcsi *cephCSIEntry
}

// errNotOwned marks an image that exists but is not the driver's.
var errNotOwned = errors.New("not a volume of this driver")

// ownedImage stats img (by name or ID) and checks it is the driver's. It
// returns an error wrapping ErrNotFound for an image that does not exist,
// and one wrapping both errNotOwned and ErrNotFound for an image that is
// someone else's.
func ownedImage(ctx context.Context, s Session, img ImageRef) (owner, error) {
	info, err := s.StatImage(ctx, img)
	if err != nil {
		return owner{}, err
	}
	o := owner{info: info, ref: ImageRef{Pool: img.Pool, Namespace: img.Namespace, Name: info.Name}}
	live, tomb, ok := imageLiveName(info.Name, info.ID)
	if !ok {
		return adoptedImage(ctx, s, o)
	}
	o.tomb = tomb
	name, err := s.Metadata(ctx, o.ref, metaName)
	if errors.Is(err, ErrNotFound) {
		return o, fmtNotOwned(info.Name, "it has no "+metaName+" metadata")
	}
	if err != nil {
		return o, err
	}
	if nameHash(name) != live[len(live)-hashLen:] {
		return o, fmtNotOwned(info.Name, "its "+metaName+" metadata does not match its name")
	}
	return o, nil
}

// adoptedImage checks that an image whose name is not one the driver
// makes is a ceph-csi volume or snapshot image, by its journal.
func adoptedImage(ctx context.Context, s Session, o owner) (owner, error) {
	live, tomb := o.info.Name, false
	if o.info.ID != "" {
		if l, found := strings.CutSuffix(live, tombstoneSep+o.info.ID); found {
			live, tomb = l, true
		}
	}
	e, ok, err := cephCSIEntryForImage(ctx, s, o.ref.Pool, o.ref.Namespace, live)
	if err != nil {
		return o, err
	}
	if !ok {
		return o, fmtNotOwned(o.info.Name, "its name is not one the driver makes and no ceph-csi journal entry names it")
	}
	o.tomb, o.cephcsi = tomb, &e
	return o, nil
}

// ownedVolume is ownedImage for an image a volume ID names: live, never
// a tombstone, which no volume ID names (a tombstone is missing too).
func ownedVolume(ctx context.Context, s Session, img ImageRef) (owner, error) {
	o, err := ownedImage(ctx, s, img)
	if err == nil && o.tomb {
		err = ErrNotFound
	}
	return o, err
}

func fmtNotOwned(image, why string) error {
	return &notOwnedError{image: image, why: why}
}

// notOwnedError says which image is not the driver's and why.
type notOwnedError struct{ image, why string }

func (e *notOwnedError) Error() string {
	return "image " + e.image + " is " + errNotOwned.Error() + ": " + e.why
}

// Unwrap makes a foreign image count as a missing volume for every
// caller that looks for ErrNotFound: to the CO, a volume the driver does
// not own does not exist.
func (e *notOwnedError) Unwrap() []error { return []error{errNotOwned, ErrNotFound} }

// isCollectableSnap tells whether a snapshot of an owned image is one the
// driver removes once nothing needs it: an internal clone snapshot, or a
// deleted CSI snapshot's tombstone (ceph-csi's included).
func isCollectableSnap(sn SnapInfo) bool {
	if rest, ok := strings.CutPrefix(sn.Name, cloneSnapPrefix); ok {
		return len(rest) == hashLen && isHex(rest)
	}
	live, ok := strings.CutSuffix(sn.Name, tombstoneSep+strconv.FormatUint(sn.ID, 10))
	if _, _, cephcsi := splitCephCSIName(live); ok && cephcsi {
		return true // a deleted ceph-csi snapshot's tombstone
	}
	return ok && isManagedName(live)
}
