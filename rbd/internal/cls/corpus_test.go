package cls

import (
	"bytes"
	"testing"

	"github.com/purerbd/purerbd/rados/denc"
	"github.com/purerbd/purerbd/rados/radostest/corpus"
)

func roundTrip[T denc.Encodable, P denc.Decodable[T]](b []byte) ([]byte, error) {
	v, err := denc.Unmarshal[T, P](b)
	if err != nil {
		return nil, err
	}
	return denc.Marshal(v), nil
}

var corpusTypes = []struct {
	typ       string
	roundTrip func([]byte) ([]byte, error)
}{
	{"cls__rbd__ParentImageSpec", roundTrip[ParentImageSpec]},
	{"cls__rbd__ChildImageSpec", roundTrip[ChildImageSpec]},
	{"cls__rbd__SnapshotNamespace", roundTrip[SnapshotNamespace]},
	{"cls__rbd__SnapshotInfo", roundTrip[SnapshotInfo]},
	{"cls_rbd_parent", roundTrip[ParentInfo]},
	{"cls_rbd_snap", roundTrip[SnapRecord]},
}

// TestCorpus decodes every Ceph-written sample of every type and checks
// that re-encoding gives the same bytes.
func TestCorpus(t *testing.T) {
	for _, ct := range corpusTypes {
		t.Run(ct.typ, func(t *testing.T) {
			samples := corpus.Samples(t, ct.typ)
			for _, s := range samples {
				out, err := ct.roundTrip(s.Data)
				if err != nil {
					t.Errorf("%s/%s: %v\n% x", s.Version, s.Name, err, s.Data)
					continue
				}
				if !bytes.Equal(out, s.Data) {
					t.Errorf("%s/%s: re-encoded differently\n got % x\nwant % x", s.Version, s.Name, out, s.Data)
				}
			}
			t.Logf("%d samples decode and re-encode identically", len(samples))
		})
	}
}

// TestCorpusValues pins the decoded values of a few samples whose
// contents are known from Ceph's generate_test_instances.
func TestCorpusValues(t *testing.T) {
	found := map[string]bool{}
	for _, s := range corpus.Samples(t, "cls_rbd_snap") {
		r, err := denc.Unmarshal[SnapRecord](s.Data)
		if err != nil {
			t.Fatal(err)
		}
		if r.ID == 1 && r.Name == "snap" {
			found["snap"] = true
			if r.ImageSize != 123456 || r.ProtectionStatus != Protected || r.Flags != 31 || r.ChildCount != 543 {
				t.Errorf("%s: %+v", s.Name, r)
			}
		}
	}
	for _, s := range corpus.Samples(t, "cls__rbd__SnapshotInfo") {
		r, err := denc.Unmarshal[SnapshotInfo](s.Data)
		if err != nil {
			t.Fatal(err)
		}
		if r.ID == 2 {
			found["group"] = true
			if r.Namespace.Type != NamespaceGroup || r.Namespace.Group.GroupPool != 567 ||
				r.Namespace.Group.GroupID != "group1" || r.ChildCount != 987 || r.ImageSize != 123 ||
				r.Timestamp.Sec != 123456 {
				t.Errorf("%s: %+v", s.Name, r)
			}
		}
	}
	for _, s := range corpus.Samples(t, "cls__rbd__SnapshotNamespace") {
		r, err := denc.Unmarshal[SnapshotNamespace](s.Data)
		if err != nil {
			t.Fatal(err)
		}
		if r.Type == NamespaceMirror && r.Mirror.State == 2 {
			found["mirror"] = true
			if len(r.Mirror.PeerUUIDs) != 1 || r.Mirror.PeerUUIDs[0] != "peer uuid" ||
				r.Mirror.PrimaryMirrorUUID != "uuid" || r.Mirror.PrimarySnapID != 123 {
				t.Errorf("%s: %+v", s.Name, r)
			}
		}
	}
	for _, s := range corpus.Samples(t, "cls_rbd_parent") {
		r, err := denc.Unmarshal[ParentInfo](s.Data)
		if err != nil {
			t.Fatal(err)
		}
		if r.PoolNamespace == "ns" {
			found["parent-ns"] = true
			if r.ImageID != "image id" || r.SnapID != 234 || r.HeadOverlap == nil || *r.HeadOverlap != 123 {
				t.Errorf("%s: %+v", s.Name, r)
			}
		}
	}
	for _, k := range []string{"snap", "group", "mirror"} {
		if !found[k] {
			t.Errorf("no %s sample found", k)
		}
	}
}
