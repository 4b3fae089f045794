// Package nodestate keeps what the CSI node service must remember about
// each staged volume to take its NBD or ublk device over again after a restart
// of the plugin.
//
// One JSON file per staged volume lives in the state directory. It
// should be on a tmpfs (/run): the files then vanish on reboot, exactly
// when the devices and mounts they describe vanish too. A record
// holds no secret: the volume ID (which says where the image is, or
// else where the image was found), the
// device index and backend cookie, the staging path, the file system,
// the access mode and the publications.
//
// The credentials that reopen the image after a restart are kept apart,
// in "<key>.secret" (mode 0600), and only when the state directory is a
// tmpfs or ramfs: never on a disk. Why keep them at all: a restarted
// plugin must serve its devices again within the kernel's dead connection
// timeout, or every I/O on them fails; the CO does not call NodeStage
// again for volumes already staged, and the calls it does make after a
// restart (NodeGetVolumeStats) carry no secrets. Without a secret file
// (state directory not in memory) the plugin falls back on its own
// credentials (--secrets-dir) and else waits, with the device holding
// I/O, for the next call that brings secrets (NodeStage, NodePublish,
// NodeExpand).
package nodestate

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"golang.org/x/sys/unix"
)

// stateVersion is the version of the record format.
const stateVersion = 1

// Record is the persistent part of a staged volume.
type Record struct {
	Version     int    `json:"version"`
	VolumeID    string `json:"volumeID"`
	StagingPath string `json:"stagingPath"`
	// DeviceType is the kernel device the volume is served through:
	// DeviceNBD (also when empty, in records of earlier versions) or
	// DeviceUblk.
	DeviceType string `json:"deviceType,omitempty"`
	// Index is N of /dev/nbdN (or /dev/ublkbN); Cookie the backend
	// cookie the kernel knows an NBD device by (the volume ID; empty on
	// kernels without cookies). A ublk device carries a tag derived from
	// the volume ID instead (UblkTag).
	Index  int    `json:"index"`
	Cookie string `json:"cookie"`
	Conns  int    `json:"conns"`
	// Block volumes have no file system and nothing mounted at the
	// staging path.
	Block  bool   `json:"block"`
	FsType string `json:"fsType,omitempty"`
	// MountFlags is a digest of the requested mount flags, which may be
	// sensitive: enough to tell a compatible request from another one.
	MountFlags string `json:"mountFlags,omitempty"`
	MountGroup string `json:"mountGroup,omitempty"`
	AccessMode string `json:"accessMode"`
	ReadOnly   bool   `json:"readOnly"`
	Exclusive  bool   `json:"exclusive"`
	// IOTimeout and ReattachTimeout, in seconds, are the volume's own
	// NBD request and dead connection timeouts (its class's mapOptions);
	// 0 keeps the node's. Kept so that a takeover sets the same ones.
	IOTimeout       int `json:"ioTimeout,omitempty"`
	ReattachTimeout int `json:"reattachTimeout,omitempty"`
	// Published maps each target path to how it is published.
	Published map[string]Publication `json:"published,omitempty"`
	// Image locates the image when the volume ID alone does not say
	// where it is (a ceph-csi volume, found through ceph-csi's journal,
	// or a static volume, found through its volume context).
	Image *Image `json:"image,omitempty"`
}

// Image locates an RBD image: cluster ID, pool ID, RADOS namespace,
// image name.
type Image struct {
	ClusterID string `json:"clusterID"`
	Pool      int64  `json:"pool"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
}

// Publication is one NodePublishVolume of a staged volume.
type Publication struct {
	ReadOnly   bool   `json:"readOnly"`
	MountFlags string `json:"mountFlags,omitempty"`
	MountGroup string `json:"mountGroup,omitempty"`
}

// DevicePath returns /dev/nbdN.
func (r *Record) DevicePath() string { return "/dev/" + r.DeviceName() }

// The device types of Record.DeviceType.
const (
	DeviceNBD  = "nbd"
	DeviceUblk = "ublk"
)

// Ublk says whether the volume is served through a ublk device.
func (r *Record) Ublk() bool { return r.DeviceType == DeviceUblk }

// DeviceName is the block device's name: nbdN or ublkbN, as in
// /sys/block.
func (r *Record) DeviceName() string {
	if r.Ublk() {
		return fmt.Sprintf("ublkb%d", r.Index)
	}
	return fmt.Sprintf("nbd%d", r.Index)
}

// UblkTag is the tag the ublk device of a volume carries in the kernel
// (ublk.Config.Tag): derived from the volume ID, so that a process that
// finds the device, after a crash that lost the record even, knows it
// for the volume's. Never 0 (untagged devices).
func UblkTag(volumeID string) uint64 {
	h := sha256.Sum256([]byte("purerbd-csi ublk device\x00" + volumeID))
	return binary.BigEndian.Uint64(h[:8]) | 1
}

// Targets returns the published target paths, sorted.
func (r *Record) Targets() []string {
	l := make([]string, 0, len(r.Published))
	for t := range r.Published {
		l = append(l, t)
	}
	sort.Strings(l)
	return l
}

// FlagsDigest summarises mount flags without keeping them: they may hold
// secrets, and the record only needs to tell whether two requests agree.
func FlagsDigest(flags []string) string {
	if len(flags) == 0 {
		return ""
	}
	sum := sha256.Sum256([]byte(strings.Join(flags, "\x00")))
	return hex.EncodeToString(sum[:12])
}

// Store reads and writes the records of one state directory.
type Store struct {
	dir string
	// inMemory says whether dir is a tmpfs or ramfs, where secrets may be
	// kept.
	inMemory bool
}

// InMemory reports whether the state directory is a tmpfs or ramfs,
// where SaveSecret keeps secrets.
func (s *Store) InMemory() bool { return s.inMemory }

// Magic numbers of statfs(2) for file systems that live in memory.
const (
	tmpfsMagic = 0x01021994
	ramfsMagic = 0x858458f6
)

// Open creates dir if needed (mode 0700) and finds out whether it lives
// in memory.
func Open(dir string) (*Store, error) {
	if !filepath.IsAbs(dir) {
		return nil, fmt.Errorf("node state directory %q is not an absolute path", dir)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("node state directory: %w", err)
	}
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return nil, fmt.Errorf("node state directory %s: statfs: %w", dir, err)
	}
	return &Store{dir: dir, inMemory: st.Type == tmpfsMagic || uint32(st.Type) == ramfsMagic}, nil
}

// stateKey names the files of a volume: a digest, since volume IDs may hold
// any printable byte, '/' included.
func stateKey(volumeID string) string {
	sum := sha256.Sum256([]byte(volumeID))
	return hex.EncodeToString(sum[:16])
}

func (s *Store) recordPath(volumeID string) string {
	return filepath.Join(s.dir, stateKey(volumeID)+".json")
}

func (s *Store) secretPath(volumeID string) string {
	return filepath.Join(s.dir, stateKey(volumeID)+".secret")
}

// Save writes r atomically (a temporary file renamed over the old one).
func (s *Store) Save(r *Record) error {
	r.Version = stateVersion
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return writeFileAtomic(s.recordPath(r.VolumeID), append(b, '\n'))
}

// load reads the record of one volume; fs.ErrNotExist when there is none.
func (s *Store) load(volumeID string) (*Record, error) {
	r, err := readRecord(s.recordPath(volumeID))
	if err != nil {
		return nil, err
	}
	if r.VolumeID != volumeID {
		return nil, fmt.Errorf("node state %s is for volume %q, not %q", s.recordPath(volumeID), r.VolumeID, volumeID)
	}
	return r, nil
}

// LoadAll reads every record. Files that do not parse are reported in
// bad, with why, and otherwise left alone.
func (s *Store) LoadAll() (recs []*Record, bad map[string]error, err error) {
	names, err := filepath.Glob(filepath.Join(s.dir, "*.json"))
	if err != nil {
		return nil, nil, err
	}
	sort.Strings(names)
	bad = map[string]error{}
	for _, n := range names {
		r, err := readRecord(n)
		if err == nil && filepath.Base(n) != stateKey(r.VolumeID)+".json" {
			err = fmt.Errorf("file name does not match volume %q", r.VolumeID)
		}
		if err != nil {
			bad[n] = err
			continue
		}
		recs = append(recs, r)
	}
	return recs, bad, nil
}

func readRecord(path string) (*Record, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	var r Record
	if err := d.Decode(&r); err != nil {
		return nil, fmt.Errorf("node state %s: %w", path, err)
	}
	switch {
	case r.Version != stateVersion:
		return nil, fmt.Errorf("node state %s: version %d, want %d", path, r.Version, stateVersion)
	case r.VolumeID == "" || r.StagingPath == "":
		return nil, fmt.Errorf("node state %s: no volume ID or staging path", path)
	case r.Index < 0:
		return nil, fmt.Errorf("node state %s: device index %d", path, r.Index)
	}
	return &r, nil
}

// Remove deletes the record and the secret of a volume; missing files
// are no error.
func (s *Store) Remove(volumeID string) error {
	var errs []error
	for _, p := range []string{s.secretPath(volumeID), s.recordPath(volumeID)} {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Secret is the cephx user and key that reopen a volume's image.
type Secret struct {
	ID  string
	Key string
	// Passphrase opens an encrypted volume's LUKS header; empty for
	// the others.
	Passphrase string
}

// secretFile is the JSON of a secret file.
type secretFile struct {
	UserID     string `json:"userID"`
	UserKey    string `json:"userKey"`
	Passphrase string `json:"encryptionPassphrase,omitempty"`
}

// SaveSecret keeps cred for a restart, only if the state directory is in
// memory; it reports whether it did.
func (s *Store) SaveSecret(volumeID string, cred Secret) (bool, error) {
	if !s.inMemory {
		return false, nil
	}
	b, err := json.Marshal(secretFile{UserID: cred.ID, UserKey: cred.Key, Passphrase: cred.Passphrase})
	if err != nil {
		return false, err
	}
	if err := writeFileAtomic(s.secretPath(volumeID), b); err != nil {
		// The error names the file, never its contents.
		return false, err
	}
	return true, nil
}

// LoadSecret returns the credentials kept for a volume, if any.
func (s *Store) LoadSecret(volumeID string) (Secret, bool, error) {
	b, err := os.ReadFile(s.secretPath(volumeID))
	if errors.Is(err, fs.ErrNotExist) {
		return Secret{}, false, nil
	}
	if err != nil {
		return Secret{}, false, err
	}
	var f secretFile
	if err := json.Unmarshal(b, &f); err != nil || f.UserID == "" || f.UserKey == "" {
		// Never quote the file: it holds a key.
		return Secret{}, false, fmt.Errorf("secret file %s does not hold a user and a key", s.secretPath(volumeID))
	}
	return Secret{ID: f.UserID, Key: f.UserKey, Passphrase: f.Passphrase}, true, nil
}

// writeFileAtomic writes b to path with mode 0600 through a temporary
// file in the same directory.
func writeFileAtomic(path string, b []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".tmp-"+filepath.Base(path)+"-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp) // after a successful rename there is nothing to remove
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
