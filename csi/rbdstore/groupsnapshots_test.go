package rbdstore_test

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/purerbd/purerbd/csi"
	"github.com/purerbd/purerbd/csi/rbdstore"
)

// rbdSnapAll is one entry of `rbd snap ls --all --format json`.
type rbdSnapAll struct {
	ID        uint64 `json:"id"`
	Name      string `json:"name"`
	Namespace struct {
		Type      string `json:"type"`
		Group     string `json:"group"`
		GroupSnap string `json:"group snap"`
	} `json:"namespace"`
}

func rbdSnapsAll(t *testing.T, spec string) []rbdSnapAll {
	t.Helper()
	var out []rbdSnapAll
	require.NoError(t, json.Unmarshal([]byte(rbdCLI(t, "snap", "ls", "--all", "--format", "json", spec)), &out))
	return out
}

func rbdGroups(t *testing.T) []string {
	t.Helper()
	var out []string
	require.NoError(t, json.Unmarshal([]byte(rbdCLI(t, "group", "ls", "--format", "json", cluster.Pool)), &out))
	return out
}

// TestGroupSnapshotOnCeph takes a VolumeGroupSnapshot of two volumes
// librbd wrote and checks it with Ceph's rbd tool: the group and its
// complete snapshot (rbd group snap ls), no members left in the group,
// each volume's member snapshot in the group namespace (rbd snap ls
// --all); both members restored through CreateVolume hold exactly the
// bytes of snapshot time though the volumes were overwritten since (rbd
// export); DeleteVolumeGroupSnapshot leaves no group and no group
// snapshot on the volumes, and the restored clones still read the same.
func TestGroupSnapshotOnCeph(t *testing.T) {
	const size = 8 << 20
	p := startPlugin(t)
	ctx := testCtx(t)
	write := func(spec string, off int64, n int) {
		b := make([]byte, n)
		rand.Read(b)
		importDiff(t, spec, off, b)
	}
	var vols []*csipb.Volume
	var specs []string
	for _, name := range []string{"vgs-a", "vgs-b"} {
		v, err := p.create(t, name, size, nil)
		require.NoError(t, err)
		vid, err := csi.ParseVolumeID(v.GetVolumeId())
		require.NoError(t, err)
		spec := cluster.Pool + "/" + vid.Image
		write(spec, 0, 64<<10)
		write(spec, 3<<20+777, 1<<20)
		write(spec, size-4096, 4096)
		vols, specs = append(vols, v), append(specs, spec)
	}
	want := [][]byte{export(t, specs[0]), export(t, specs[1])}
	require.False(t, bytes.Equal(want[0], want[1]))

	r, err := p.group.CreateVolumeGroupSnapshot(ctx, &csipb.CreateVolumeGroupSnapshotRequest{
		Name: "vgs-1", SourceVolumeIds: []string{vols[0].GetVolumeId(), vols[1].GetVolumeId()},
		Parameters: map[string]string{"clusterID": cluster.FSID}, Secrets: userSecrets()})
	require.NoError(t, err)
	vgs := r.GetGroupSnapshot()
	gid, err := csi.ParseGroupSnapshotID(vgs.GetGroupSnapshotId())
	require.NoError(t, err)
	require.Len(t, vgs.GetSnapshots(), 2)
	// After the snapshot, other data: the restores must not see it.
	for _, spec := range specs {
		write(spec, 0, 64<<10)
		write(spec, 3<<20+777, 1<<20)
	}
	for i, spec := range specs {
		require.False(t, bytes.Equal(want[i], export(t, spec)), "the volume changed after the snapshot")
	}

	// Ceph's view: the group, its complete snapshot, no members.
	assert.Contains(t, rbdGroups(t), gid.Group)
	var gsnaps []struct {
		Snapshot string `json:"snapshot"`
		State    string `json:"state"`
	}
	require.NoError(t, json.Unmarshal([]byte(rbdCLI(t, "group", "snap", "ls", "--format", "json", cluster.Pool+"/"+gid.Group)), &gsnaps))
	require.Len(t, gsnaps, 1)
	assert.Equal(t, gid.Group, gsnaps[0].Snapshot)
	// Pacific's and Reef's rbd print a complete group snapshot's state
	// as "ok", Tentacle's as "complete"; an interrupted one is
	// "incomplete".
	assert.Contains(t, []string{"ok", "complete"}, gsnaps[0].State)
	t.Logf("%s: the group snapshot's state is %q", strings.TrimSpace(rbdCLI(t, "--version")), gsnaps[0].State)
	assert.Equal(t, "", strings.TrimSpace(rbdCLI(t, "group", "image", "ls", cluster.Pool+"/"+gid.Group)), "the sources are released")

	member := map[string]*csipb.Snapshot{}
	for _, sn := range vgs.GetSnapshots() {
		assert.Equal(t, vgs.GetGroupSnapshotId(), sn.GetGroupSnapshotId())
		assert.Equal(t, int64(size), sn.GetSizeBytes())
		member[sn.GetSourceVolumeId()] = sn
	}
	var restored []*csipb.Volume
	for i, v := range vols {
		sn := member[v.GetVolumeId()]
		require.NotNil(t, sn, "a member for %s", v.GetVolumeId())
		sid, err := csi.ParseSnapshotID(sn.GetSnapshotId())
		require.NoError(t, err)
		var found bool
		for _, s := range rbdSnapsAll(t, specs[i]) {
			if s.Name == sid.Snap {
				found = true
				assert.Equal(t, "group", s.Namespace.Type)
				assert.Equal(t, gid.Group, s.Namespace.Group)
				assert.Equal(t, gid.Group, s.Namespace.GroupSnap)
			}
		}
		assert.True(t, found, "rbd snap ls --all %s lists %s", specs[i], sid.Snap)

		got, err := p.ctrl.GetSnapshot(ctx, &csipb.GetSnapshotRequest{SnapshotId: sn.GetSnapshotId(), Secrets: userSecrets()})
		require.NoError(t, err)
		assert.Equal(t, vgs.GetGroupSnapshotId(), got.GetSnapshot().GetGroupSnapshotId())
		assert.Equal(t, codes.InvalidArgument, status.Code(p.deleteSnapshot(t, sn.GetSnapshotId())), "a member is deleted with its group")

		rv, err := p.create(t, "vgs-restored-"+string(rune('a'+i)), size, fromSnapshot(sn.GetSnapshotId()))
		require.NoError(t, err)
		rid, err := csi.ParseVolumeID(rv.GetVolumeId())
		require.NoError(t, err)
		assert.True(t, bytes.Equal(want[i], export(t, cluster.Pool+"/"+rid.Image)), "volume %d restored from the group snapshot holds the bytes of snapshot time", i)
		restored = append(restored, rv)
	}

	_, err = p.group.DeleteVolumeGroupSnapshot(ctx, &csipb.DeleteVolumeGroupSnapshotRequest{
		GroupSnapshotId: vgs.GetGroupSnapshotId(), SnapshotIds: []string{vgs.GetSnapshots()[1].GetSnapshotId(), vgs.GetSnapshots()[0].GetSnapshotId()},
		Secrets: userSecrets()})
	require.NoError(t, err)
	assert.NotContains(t, rbdGroups(t), gid.Group)
	for _, spec := range specs {
		for _, s := range rbdSnapsAll(t, spec) {
			assert.NotEqual(t, "group", s.Namespace.Type, "%s keeps group snapshot %s", spec, s.Name)
			assert.Equal(t, "trash", s.Namespace.Type, "%s: only the members the clones need stay, in the trash: %s", spec, s.Name)
		}
	}
	_, err = p.group.GetVolumeGroupSnapshot(ctx, &csipb.GetVolumeGroupSnapshotRequest{GroupSnapshotId: vgs.GetGroupSnapshotId(), Secrets: userSecrets()})
	assert.Equal(t, codes.NotFound, status.Code(err))
	gone := gid
	gone.Pool = 4242 // no such pool
	for _, id := range []string{vgs.GetGroupSnapshotId(), gone.String()} {
		_, err = p.group.DeleteVolumeGroupSnapshot(ctx, &csipb.DeleteVolumeGroupSnapshotRequest{GroupSnapshotId: id, Secrets: userSecrets()})
		assert.NoError(t, err, "deleting %s again", id)
	}
	for i, rv := range restored {
		rid, _ := csi.ParseVolumeID(rv.GetVolumeId())
		assert.True(t, bytes.Equal(want[i], export(t, cluster.Pool+"/"+rid.Image)), "restored volume %d after the group snapshot's deletion", i)
	}

	// The sources go (kept as tombstones for their clones), then the
	// clones, and with them everything.
	for _, v := range append(vols, restored...) {
		require.NoError(t, p.deleteVolume(t, v.GetVolumeId()))
	}
	for _, img := range images(t) {
		assert.NotContains(t, img, "vgs", "left behind")
	}
	for _, spec := range specs {
		out, err := cluster.Rbd(ctx, "info", spec)
		assert.Error(t, err, "%s is gone: %s", spec, out)
	}
}

// TestGroupSnapshotFaultsOnCeph fails CreateVolumeGroupSnapshot before
// each of its steps on a real cluster: before the cut nothing is left
// that Ceph's rbd can see (no group, no member snapshot, the volumes in
// no group: DeleteVolume would not be blocked); after it the retry
// finds the group snapshot complete and releases the members.
func TestGroupSnapshotFaultsOnCeph(t *testing.T) {
	p := startPlugin(t)
	ctx := testCtx(t)
	var ids, specs []string
	for _, name := range []string{"vgsf-a", "vgsf-b"} {
		v, err := p.create(t, name, 4<<20, nil)
		require.NoError(t, err)
		vid, err := csi.ParseVolumeID(v.GetVolumeId())
		require.NoError(t, err)
		ids, specs = append(ids, v.GetVolumeId()), append(specs, cluster.Pool+"/"+vid.Image)
	}
	req := &csipb.CreateVolumeGroupSnapshotRequest{Name: "vgsf", SourceVolumeIds: ids, Secrets: userSecrets()}
	failAt := func(step string) {
		p.fail = func(s string) error {
			if s == step {
				p.fail = nil
				return errors.New("injected")
			}
			return nil
		}
	}
	for _, step := range []string{"create-group-snapshot/reserve", "create-group-snapshot/group", "create-group-snapshot/add", "create-group-snapshot/snapshot"} {
		failAt(step)
		_, err := p.group.CreateVolumeGroupSnapshot(ctx, req)
		require.Error(t, err, step)
		for _, g := range rbdGroups(t) {
			assert.NotContains(t, g, "csi-vgs-", "%s: group %s left", step, g)
		}
		for _, spec := range specs {
			assert.Empty(t, rbdSnapsAll(t, spec), "%s: snapshots left on %s", step, spec)
			assert.NotContains(t, rbdCLI(t, "info", spec), "group:", "%s: %s still in a group", step, spec)
		}
	}
	failAt("create-group-snapshot/release")
	_, err := p.group.CreateVolumeGroupSnapshot(ctx, req)
	require.Error(t, err)
	r, err := p.group.CreateVolumeGroupSnapshot(ctx, req)
	require.NoError(t, err)
	gid, err := csi.ParseGroupSnapshotID(r.GetGroupSnapshot().GetGroupSnapshotId())
	require.NoError(t, err)
	assert.Equal(t, "", strings.TrimSpace(rbdCLI(t, "group", "image", "ls", cluster.Pool+"/"+gid.Group)))
	for _, spec := range specs {
		assert.Len(t, rbdSnapsAll(t, spec), 1, spec)
	}
	_, err = p.group.DeleteVolumeGroupSnapshot(ctx, &csipb.DeleteVolumeGroupSnapshotRequest{GroupSnapshotId: gid.String(), Secrets: userSecrets()})
	require.NoError(t, err)
	for _, spec := range specs {
		assert.Empty(t, rbdSnapsAll(t, spec), spec)
	}
	for _, id := range ids {
		require.NoError(t, p.deleteVolume(t, id))
	}
}

// TestDeleteVolumeLeavesInterruptedGroupOnCeph: a source left in the
// driver's group by a CreateVolumeGroupSnapshot that died before its
// cut (rbd group add, as the dead call left it) is removed by
// DeleteVolume, which librbd would refuse while it is a member; the
// sweep then removes the group.
func TestDeleteVolumeLeavesInterruptedGroupOnCeph(t *testing.T) {
	p := startPlugin(t)
	ctx := testCtx(t)
	v, err := p.create(t, "vgsi-a", 4<<20, nil)
	require.NoError(t, err)
	vid, err := csi.ParseVolumeID(v.GetVolumeId())
	require.NoError(t, err)
	st := rbdstore.New(rbdstore.Options{})
	defer st.Close()
	s, err := st.Session(ctx, csiCluster(), admin())
	require.NoError(t, err)
	sum := sha256.Sum256([]byte("vgsi"))
	group := "csi-vgs-" + hex.EncodeToString(sum[:])[:32]
	require.NoError(t, s.SetReservation(ctx, vid.Pool, "", "csi.group."+group, "vgsi"))
	rbdCLI(t, "group", "create", cluster.Pool+"/"+group)
	rbdCLI(t, "group", "image", "add", cluster.Pool+"/"+group, cluster.Pool+"/"+vid.Image)

	require.NoError(t, p.deleteVolume(t, v.GetVolumeId()))
	assert.NotContains(t, rbdCLI(t, "ls", cluster.Pool), vid.Image)
	assert.Equal(t, "", strings.TrimSpace(rbdCLI(t, "group", "image", "ls", cluster.Pool+"/"+group)))

	// The sweep removes the group the dead call left, and a group of
	// that shape not reserved by the driver stays.
	sum = sha256.Sum256([]byte("not the driver's"))
	foreign := "csi-vgs-" + hex.EncodeToString(sum[:])[:32]
	rbdCLI(t, "group", "create", cluster.Pool+"/"+foreign)
	require.NoError(t, p.drv.Sweep(ctx))
	groups := rbdGroups(t)
	assert.NotContains(t, groups, group)
	assert.Contains(t, groups, foreign)
	_, err = s.Reservation(ctx, vid.Pool, "", "csi.group."+group)
	assert.ErrorIs(t, err, csi.ErrNotFound)
	rbdCLI(t, "group", "rm", cluster.Pool+"/"+foreign)
}

// TestGroupSnapshotOfOpenVolumesOnCeph takes a VolumeGroupSnapshot of
// two volumes opened as the node opens them (each holding its exclusive
// lock) while a writer stamps record i into the first, then, once that
// write is acknowledged, into the second. The group snapshot holds
// writes to both back at once, so restored from it the second volume
// never has a record the first lacks (one snapshot after the other
// could: the first snapped before a record, the second after). The
// records are read back with rbd export; both volumes' locks return to
// the writer, which goes on.
func TestGroupSnapshotOfOpenVolumesOnCeph(t *testing.T) {
	const size, rec = 8 << 20, 4096
	p := startPlugin(t)
	ctx := testCtx(t)
	st := rbdstore.New(rbdstore.Options{})
	defer st.Close()
	var ids []string
	var imgs []csi.NodeImage
	for _, name := range []string{"vgso-a", "vgso-b"} {
		v, err := p.create(t, name, size, nil)
		require.NoError(t, err)
		vid, err := csi.ParseVolumeID(v.GetVolumeId())
		require.NoError(t, err)
		img, err := st.OpenImage(ctx, csiCluster(), admin(), vid, csi.OpenImageOptions{Exclusive: true})
		require.NoError(t, err)
		defer img.Close()
		ids, imgs = append(ids, v.GetVolumeId()), append(imgs, img)
	}
	stamp := func(i int) []byte {
		b := make([]byte, rec)
		binary.LittleEndian.PutUint64(b, uint64(i)+1)
		return b
	}
	var done atomic.Int64 // records written to both
	stop := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		for i := 0; i < size/rec; i++ {
			select {
			case <-stop:
				return
			default:
			}
			for _, img := range imgs {
				if _, err := img.WriteAtContext(ctx, stamp(i), int64(i)*rec); err != nil {
					t.Errorf("record %d: %v", i, err)
					return
				}
			}
			done.Store(int64(i) + 1)
		}
	}()
	// some records before the cut, and some after
	waitFor := func(n int64) {
		t.Helper()
		for done.Load() < n {
			select {
			case <-finished:
				t.Fatalf("the writer stopped at %d records, short of %d", done.Load(), n)
			case <-time.After(time.Millisecond):
			}
		}
	}
	waitFor(64)
	r, err := p.group.CreateVolumeGroupSnapshot(ctx, &csipb.CreateVolumeGroupSnapshotRequest{
		Name: "vgso", SourceVolumeIds: ids, Secrets: userSecrets()})
	require.NoError(t, err)
	waitFor(done.Load() + 64)
	close(stop)
	<-finished
	n := int(done.Load())
	require.False(t, t.Failed())

	count := func(b []byte) int { // records stamped, in order from 0
		k := 0
		for ; k < size/rec && binary.LittleEndian.Uint64(b[k*rec:]) == uint64(k)+1; k++ {
		}
		return k
	}
	var got []int
	for i, id := range ids {
		var sn *csipb.Snapshot
		for _, m := range r.GetGroupSnapshot().GetSnapshots() {
			if m.GetSourceVolumeId() == id {
				sn = m
			}
		}
		require.NotNil(t, sn)
		rv, err := p.create(t, "vgso-restored-"+string(rune('a'+i)), size, fromSnapshot(sn.GetSnapshotId()))
		require.NoError(t, err)
		rid, err := csi.ParseVolumeID(rv.GetVolumeId())
		require.NoError(t, err)
		got = append(got, count(export(t, cluster.Pool+"/"+rid.Image)))
		require.NoError(t, p.deleteVolume(t, rv.GetVolumeId()))
	}
	t.Logf("records written %d; in the group snapshot: first volume %d, second %d", n, got[0], got[1])
	assert.Positive(t, got[1], "records before the cut are in the snapshot")
	assert.Less(t, got[0], n, "records after the cut are not")
	assert.Contains(t, []int{got[1], got[1] + 1}, got[0], "the second volume has every record of the first but the one in flight between them")
	for _, img := range imgs {
		require.NoError(t, img.Close())
	}
	_, err = p.group.DeleteVolumeGroupSnapshot(ctx, &csipb.DeleteVolumeGroupSnapshotRequest{GroupSnapshotId: r.GetGroupSnapshot().GetGroupSnapshotId(), Secrets: userSecrets()})
	require.NoError(t, err)
	for _, id := range ids {
		require.NoError(t, p.deleteVolume(t, id))
	}
}
