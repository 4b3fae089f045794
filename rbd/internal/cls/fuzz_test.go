package cls

import (
	"bytes"
	"testing"

	"github.com/purerbd/purerbd/internal/alloctest"
)

// replyDecoders are the decoders of class-method replies and on-disk
// records, driven by FuzzReplies: the first input byte picks one (modulo
// the length), the rest is its input. The order is fixed: the committed
// seed corpus depends on it (the corpus types come first).
var replyDecoders = append(append([]struct {
	typ       string
	roundTrip func([]byte) ([]byte, error)
}{}, corpusTypes...), []struct {
	typ       string
	roundTrip func([]byte) ([]byte, error)
}{
	{"LockInfo", roundTrip[LockInfo]},
	{"get_size", func(b []byte) ([]byte, error) { _, _, err := DecodeGetSize(b); return nil, err }},
	{"get_features", func(b []byte) ([]byte, error) { _, _, err := DecodeGetFeatures(b); return nil, err }},
	{"get_snapcontext", func(b []byte) ([]byte, error) { _, err := DecodeGetSnapContext(b); return nil, err }},
	{"dir_list", func(b []byte) ([]byte, error) { _, err := DecodeDirList(b); return nil, err }},
	{"metadata_list", func(b []byte) ([]byte, error) { _, err := DecodeMetadataList(b); return nil, err }},
	{"children_list", func(b []byte) ([]byte, error) { _, err := DecodeChildrenList(b); return nil, err }},
	{"parent_overlap_get", func(b []byte) ([]byte, error) { _, err := DecodeParentOverlapGet(b); return nil, err }},
	{"get_parent", func(b []byte) ([]byte, error) { _, _, err := DecodeGetParent(b); return nil, err }},
	{"string", func(b []byte) ([]byte, error) { _, err := DecodeString(b); return nil, err }},
	{"list_locks", func(b []byte) ([]byte, error) { _, err := DecodeListLocks(b); return nil, err }},
	{"object_map_load", func(b []byte) ([]byte, error) {
		bv, err := DecodeObjectMapLoad(b)
		if err != nil {
			return nil, err
		}
		return bv.Marshal(), nil
	}},
	{"get_stripe_unit_count", func(b []byte) ([]byte, error) { _, _, err := DecodeGetStripeUnitCount(b); return nil, err }},
	{"snapshot_get", func(b []byte) ([]byte, error) { _, err := DecodeSnapshotGet(b); return nil, err }},
	{"GroupImageStatus", roundTrip[GroupImageStatus]},
	{"GroupSpec", roundTrip[GroupSpec]},
	{"GroupSnapshot", roundTrip[GroupSnapshot]},
	{"group_dir_list", func(b []byte) ([]byte, error) { _, err := DecodeGroupDirList(b); return nil, err }},
	{"group_image_list", func(b []byte) ([]byte, error) { _, err := DecodeGroupImageList(b); return nil, err }},
	{"group_snap_list", func(b []byte) ([]byte, error) { _, err := DecodeGroupSnapList(b); return nil, err }},
	{"image_group_get", func(b []byte) ([]byte, error) { _, err := DecodeImageGroupGet(b); return nil, err }},
}...)

// FuzzReplies feeds arbitrary bytes to every reply decoder: none may
// panic, and whatever decodes must re-encode to a fixed point.
func FuzzReplies(f *testing.F) {
	f.Add([]byte{1, 2, 1, 0x13, 0, 0, 0, 0x7b, 0, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 'a', 'b', 'c', 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) == 0 {
			return
		}
		rd := replyDecoders[int(b[0])%len(replyDecoders)]
		var once []byte
		var err error
		alloctest.Check(t, len(b), func() { once, err = rd.roundTrip(b[1:]) })
		if err != nil || once == nil {
			return
		}
		twice, err := rd.roundTrip(once)
		if err != nil {
			t.Fatalf("%s: re-encoding % x does not decode: %v", rd.typ, once, err)
		}
		if !bytes.Equal(once, twice) {
			t.Fatalf("%s: unstable\nfirst  % x\nsecond % x", rd.typ, once, twice)
		}
	})
}
