package nodestate

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func testRecord(id string) *Record {
	return &Record{
		VolumeID:    id,
		StagingPath: "/var/lib/kubelet/plugins/x/globalmount",
		Index:       3,
		Cookie:      id,
		Conns:       4,
		FsType:      "ext4",
		MountFlags:  FlagsDigest([]string{"noatime"}),
		AccessMode:  "SINGLE_NODE_MULTI_WRITER",
		Exclusive:   true,
		Published:   map[string]Publication{"/t/1": {ReadOnly: true}},
	}
}

func TestStateRoundTrip(t *testing.T) {
	s, err := Open(t.TempDir())
	require.NoError(t, err)
	// A volume ID with every awkward byte a file name cannot hold.
	id := "v1-3-a/b-2-0--img/../x"
	r := testRecord(id)
	require.NoError(t, s.Save(r))
	got, err := s.load(id)
	require.NoError(t, err)
	assert.Equal(t, r, got)
	assert.Equal(t, stateVersion, got.Version)

	fi, err := os.Stat(s.recordPath(id))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	assert.Equal(t, s.dir, filepath.Dir(s.recordPath(id)), "the file name stays in the directory")

	// Rewrites replace the record.
	r.Published = nil
	require.NoError(t, s.Save(r))
	got, err = s.load(id)
	require.NoError(t, err)
	assert.Empty(t, got.Published)

	require.NoError(t, s.Remove(id))
	_, err = s.load(id)
	assert.ErrorIs(t, err, os.ErrNotExist)
	require.NoError(t, s.Remove(id), "removing twice")
	left, _ := filepath.Glob(filepath.Join(s.dir, "*"))
	assert.Empty(t, left, "no temporary files left")
}

func TestStateLoadAll(t *testing.T) {
	s, err := Open(t.TempDir())
	require.NoError(t, err)
	for _, id := range []string{"v1-1-a-0-0--one", "v1-1-a-0-0--two"} {
		require.NoError(t, s.Save(testRecord(id)))
	}
	// A record under the wrong name, one from the future, and garbage.
	b, _ := os.ReadFile(s.recordPath("v1-1-a-0-0--one"))
	require.NoError(t, os.WriteFile(filepath.Join(s.dir, "0000.json"), b, 0o600))
	future := strings.Replace(string(b), `"version": 1`, `"version": 9`, 1)
	require.NoError(t, os.WriteFile(filepath.Join(s.dir, stateKey("v1-1-a-0-0--nine")+".json"), []byte(future), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(s.dir, "junk.json"), []byte("{"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(s.dir, "extra.json"), []byte(`{"version":1,"volumeID":"x","stagingPath":"/s","index":0,"cookie":"","conns":1,"block":true,"accessMode":"","readOnly":false,"exclusive":false,"surprise":1}`), 0o600))

	recs, bad, err := s.LoadAll()
	require.NoError(t, err)
	var ids []string
	for _, r := range recs {
		ids = append(ids, r.VolumeID)
	}
	assert.ElementsMatch(t, []string{"v1-1-a-0-0--one", "v1-1-a-0-0--two"}, ids)
	assert.Len(t, bad, 4, "%v", bad)
}

func TestSecretsOnlyInMemory(t *testing.T) {
	cred := Secret{ID: "csi-node", Key: "AQBsecretsecretsecretsecretsecretsecret=="}

	// t.TempDir is on the root file system here, a disk: nothing kept.
	disk, err := Open(t.TempDir())
	require.NoError(t, err)
	if disk.InMemory() {
		t.Fatalf("%s is not expected to be a tmpfs on this machine", disk.dir)
	}
	kept, err := disk.SaveSecret("v", cred)
	require.NoError(t, err)
	assert.False(t, kept)
	_, ok, err := disk.LoadSecret("v")
	require.NoError(t, err)
	assert.False(t, ok)

	// /dev/shm is a tmpfs.
	dir, err := os.MkdirTemp("/dev/shm", "purerbd-nodestate-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	mem, err := Open(dir)
	require.NoError(t, err)
	require.True(t, mem.InMemory(), "/dev/shm should be a tmpfs")
	kept, err = mem.SaveSecret("v", cred)
	require.NoError(t, err)
	assert.True(t, kept)
	fi, err := os.Stat(mem.secretPath("v"))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	got, ok, err := mem.LoadSecret("v")
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Equal(t, cred, got)

	// The record never holds the key.
	require.NoError(t, mem.Save(testRecord("v")))
	b, err := os.ReadFile(mem.recordPath("v"))
	require.NoError(t, err)
	assert.NotContains(t, string(b), cred.Key)

	// A damaged secret file is reported without its contents.
	require.NoError(t, os.WriteFile(mem.secretPath("v"), []byte(cred.Key), 0o600))
	_, _, err = mem.LoadSecret("v")
	require.Error(t, err)
	assert.NotContains(t, err.Error(), cred.Key)

	require.NoError(t, mem.Remove("v"))
	left, _ := filepath.Glob(filepath.Join(dir, "*"))
	assert.Empty(t, left)
}

func TestFlagsDigest(t *testing.T) {
	assert.Equal(t, "", FlagsDigest(nil))
	a := FlagsDigest([]string{"noatime", "discard"})
	assert.Equal(t, a, FlagsDigest([]string{"noatime", "discard"}))
	assert.NotEqual(t, a, FlagsDigest([]string{"noatime,discard"}))
	assert.NotContains(t, a, "noatime")
}

// TestDeviceKinds checks the device a record names: NBD for records of
// earlier versions (no deviceType) and for "nbd", ublk's block device
// for "ublk", and the JSON of each.
func TestDeviceKinds(t *testing.T) {
	r := testRecord("vol-a")
	assert.False(t, r.Ublk())
	assert.Equal(t, "/dev/nbd3", r.DevicePath())
	assert.Equal(t, "nbd3", r.DeviceName())
	b, err := json.Marshal(r)
	require.NoError(t, err)
	assert.NotContains(t, string(b), "deviceType", "an NBD record reads as earlier versions wrote it")

	r.DeviceType = DeviceUblk
	assert.True(t, r.Ublk())
	assert.Equal(t, "/dev/ublkb3", r.DevicePath())
	b, err = json.Marshal(r)
	require.NoError(t, err)
	var back Record
	require.NoError(t, json.Unmarshal(b, &back))
	assert.Equal(t, "/dev/ublkb3", back.DevicePath())

	// the tag: stable, per volume, never 0
	assert.Equal(t, UblkTag("vol-a"), UblkTag("vol-a"))
	assert.NotEqual(t, UblkTag("vol-a"), UblkTag("vol-b"))
	assert.NotZero(t, UblkTag(""))
}
