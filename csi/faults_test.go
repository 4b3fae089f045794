package csi_test

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"testing"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
)

// A scenario is an operation run on a harness prepared by setup; op
// returns an identity for its result (an ID, or "") to compare runs.
type scenario struct {
	name  string
	setup func(h *harness) map[string]string
	op    func(h *harness, ids map[string]string) (string, error)
}

func fromSnapshot(id string) *csipb.VolumeContentSource {
	return &csipb.VolumeContentSource{Type: &csipb.VolumeContentSource_Snapshot{
		Snapshot: &csipb.VolumeContentSource_SnapshotSource{SnapshotId: id}}}
}

func fromVolume(id string) *csipb.VolumeContentSource {
	return &csipb.VolumeContentSource{Type: &csipb.VolumeContentSource_Volume{
		Volume: &csipb.VolumeContentSource_VolumeSource{VolumeId: id}}}
}

func (h *harness) tryCreate(name string, size int64, src *csipb.VolumeContentSource) (string, error) {
	req := h.volReq(name, size)
	req.VolumeContentSource = src
	r, err := h.ctrl.CreateVolume(context.Background(), req)
	return r.GetVolume().GetVolumeId(), err
}

func (h *harness) trySnapshot(name, vol string) (string, error) {
	r, err := h.ctrl.CreateSnapshot(context.Background(), &csipb.CreateSnapshotRequest{Name: name, SourceVolumeId: vol, Secrets: secrets()})
	return r.GetSnapshot().GetSnapshotId(), err
}

var scenarios = []scenario{
	{
		name:  "create volume",
		setup: func(*harness) map[string]string { return nil },
		op:    func(h *harness, _ map[string]string) (string, error) { return h.tryCreate("new", 4<<20, nil) },
	},
	{
		name: "create volume from snapshot, larger",
		setup: func(h *harness) map[string]string {
			v := h.createVolume("src", 4<<20)
			return map[string]string{"snap": h.createSnapshot("snap", v.GetVolumeId()).GetSnapshotId()}
		},
		op: func(h *harness, ids map[string]string) (string, error) {
			return h.tryCreate("restored", 8<<20, fromSnapshot(ids["snap"]))
		},
	},
	{
		name: "clone volume",
		setup: func(h *harness) map[string]string {
			return map[string]string{"vol": h.createVolume("src", 4<<20).GetVolumeId()}
		},
		op: func(h *harness, ids map[string]string) (string, error) {
			return h.tryCreate("clone", 8<<20, fromVolume(ids["vol"]))
		},
	},
	{
		name: "delete volume",
		setup: func(h *harness) map[string]string {
			return map[string]string{"vol": h.createVolume("v", 4<<20).GetVolumeId()}
		},
		op: func(h *harness, ids map[string]string) (string, error) { return "", h.deleteVolume(ids["vol"]) },
	},
	{
		name: "delete volume with a snapshot (tombstone)",
		setup: func(h *harness) map[string]string {
			v := h.createVolume("v", 4<<20)
			h.createSnapshot("s", v.GetVolumeId())
			return map[string]string{"vol": v.GetVolumeId()}
		},
		op: func(h *harness, ids map[string]string) (string, error) { return "", h.deleteVolume(ids["vol"]) },
	},
	{
		name: "delete the last clone of a deleted snapshot of a deleted volume (cascade)",
		setup: func(h *harness) map[string]string {
			v := h.createVolume("v", 4<<20)
			s := h.createSnapshot("s", v.GetVolumeId())
			c, err := h.tryCreate("c", 4<<20, fromSnapshot(s.GetSnapshotId()))
			require.NoError(h.t, err)
			require.NoError(h.t, h.deleteVolume(v.GetVolumeId()))
			require.NoError(h.t, h.deleteSnapshot(s.GetSnapshotId()))
			return map[string]string{"clone": c}
		},
		op: func(h *harness, ids map[string]string) (string, error) { return "", h.deleteVolume(ids["clone"]) },
	},
	{
		name: "delete a clone of a volume",
		setup: func(h *harness) map[string]string {
			v := h.createVolume("v", 4<<20)
			c, err := h.tryCreate("c", 4<<20, fromVolume(v.GetVolumeId()))
			require.NoError(h.t, err)
			return map[string]string{"clone": c}
		},
		op: func(h *harness, ids map[string]string) (string, error) { return "", h.deleteVolume(ids["clone"]) },
	},
	{
		name: "create snapshot",
		setup: func(h *harness) map[string]string {
			return map[string]string{"vol": h.createVolume("v", 4<<20).GetVolumeId()}
		},
		op: func(h *harness, ids map[string]string) (string, error) { return h.trySnapshot("s", ids["vol"]) },
	},
	{
		name: "delete snapshot",
		setup: func(h *harness) map[string]string {
			v := h.createVolume("v", 4<<20)
			return map[string]string{"snap": h.createSnapshot("s", v.GetVolumeId()).GetSnapshotId()}
		},
		op: func(h *harness, ids map[string]string) (string, error) { return "", h.deleteSnapshot(ids["snap"]) },
	},
	{
		name: "delete the last snapshot of a deleted volume",
		setup: func(h *harness) map[string]string {
			v := h.createVolume("v", 4<<20)
			s := h.createSnapshot("s", v.GetVolumeId())
			require.NoError(h.t, h.deleteVolume(v.GetVolumeId()))
			return map[string]string{"snap": s.GetSnapshotId()}
		},
		op: func(h *harness, ids map[string]string) (string, error) { return "", h.deleteSnapshot(ids["snap"]) },
	},
	{
		name: "delete a snapshot with a clone (tombstone)",
		setup: func(h *harness) map[string]string {
			v := h.createVolume("v", 4<<20)
			s := h.createSnapshot("s", v.GetVolumeId())
			_, err := h.tryCreate("c", 4<<20, fromSnapshot(s.GetSnapshotId()))
			require.NoError(h.t, err)
			return map[string]string{"snap": s.GetSnapshotId()}
		},
		op: func(h *harness, ids map[string]string) (string, error) { return "", h.deleteSnapshot(ids["snap"]) },
	},
}

var tombstoneID = regexp.MustCompile(`-deleted-[0-9a-z]+`)

// state is the fake cluster's images, snapshots and reservations, with
// the IDs inside tombstone names blanked (they depend on how many images
// a run made).
func (h *harness) state() []string {
	var out []string
	for _, n := range h.imageNames() {
		out = append(out, tombstoneID.ReplaceAllString(n, "-deleted-N"))
	}
	for k := range h.store.Reservations(testCluster, h.pool, "") {
		out = append(out, "reservation "+k)
	}
	slices.Sort(out)
	return out
}

// TestFailureInjectionConverges fails each internal step of each
// multi-step operation once, as if the plugin died there, then retries:
// the retry must succeed with the same result, and after a Sweep (which
// collects what a crash between "remove" and "cascade" leaves) the
// cluster must hold exactly what an undisturbed run leaves.
//
// Both behaviours of RBD for removing a snapshot that clones need are
// covered: refusing (EBUSY) and librbd's clone v2 snapshot trash.
func TestFailureInjectionConverges(t *testing.T) {
	for _, trash := range []bool{false, true} {
		t.Run(fmt.Sprintf("trash=%v", trash), func(t *testing.T) { failureInjection(t, harnessOpts{trash: trash}) })
	}
}

func failureInjection(t *testing.T, o harnessOpts) {
	ctx := context.Background()
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			clean := newHarness(t, o)
			ids := sc.setup(clean)
			clean.faults.steps()
			want, err := sc.op(clean, ids)
			require.NoError(t, err)
			steps := clean.faults.steps()
			require.NoError(t, clean.drv.Sweep(ctx))
			wantState := clean.state()
			t.Logf("steps %v; final state %v", steps, wantState)
			require.NotEmpty(t, steps, "the operation has no steps to fail")

			for _, step := range dedupe(steps) {
				h := newHarness(t, o)
				ids := sc.setup(h)
				h.faults.failOnce(step)
				_, err := sc.op(h, ids)
				require.Equal(t, codes.Internal, code(err), "step %s: %v", step, err)
				got, err := sc.op(h, ids)
				require.NoError(t, err, "retry after a failure at %s", step)
				assert.Equal(t, want, got, "retry after a failure at %s", step)
				require.NoError(t, h.drv.Sweep(ctx))
				assert.Equal(t, wantState, h.state(), "state after a failure at %s", step)
			}
		})
	}
}

func dedupe(s []string) []string {
	var out []string
	for _, x := range s {
		if !slices.Contains(out, x) {
			out = append(out, x)
		}
	}
	return out
}
