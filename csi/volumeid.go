package csi

// Volume and snapshot IDs.
//
// A CSI volume ID must let a node open the image with nothing but the ID
// and the cluster configuration (monitors per cluster ID), so it carries
// everything needed to find the image: a format version, the cluster ID,
// the pool ID (a number: pools can be renamed, their IDs never change),
// the RADOS namespace and the image name. Snapshot IDs carry the source
// image's ID instead of its name (a source volume deleted while it still
// has snapshots is renamed, its ID stays) and the RBD snapshot name.
//
// Both are plain ASCII, readable by an operator, and at most 128 bytes,
// the limit of the CSI spec:
//
//	volume ID   = "v1-" LEN "-" clusterID "-" POOL "-" LEN "-" namespace "-" imagename
//	snapshot ID = "s1-" LEN "-" clusterID "-" POOL "-" LEN "-" namespace "-" LEN "-" imageid "-" snapname
//
// LEN is the byte length of the field that follows and POOL the pool ID,
// both in lower-case hexadecimal without leading zeros ("0" for zero), so
// any field may itself contain "-". Fields are printable ASCII without
// spaces (0x21-0x7e); image and snapshot names must not contain "/" or
// "@"; the image ID is lower-case alphanumeric like the IDs librbd
// assigns. The namespace may be empty ("0-" then "-"). There is exactly
// one encoding of each ID: decoding rejects leading zeros, upper-case hex
// and any trailing bytes, so Encode(Parse(s)) == s.
//
// Example, cluster "b6f6...3e07" (36 bytes), pool 2, no namespace:
//
//	v1-24-b6f6c1d2-8a9e-4e4b-9a43-3f0b8d6c3e07-2-0--csi-vol-5d41402abc4b2a76b9719d911017c592
//
// With a 36-byte cluster ID and the default 40-byte image names a volume ID
// is 88 bytes, leaving room for a namespace of up to 39 bytes (or a longer
// volumeNamePrefix); a snapshot ID with a 12-character image ID and no
// namespace is 104 bytes. Anything that would not fit is refused when the volume or
// snapshot is created, with an error naming the fields to shorten.

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// MaxIDLength is the CSI limit on volume and snapshot IDs, in bytes.
const MaxIDLength = 128

// VolumeID locates the image behind a CSI volume.
type VolumeID struct {
	ClusterID string
	Pool      int64
	Namespace string
	Image     string // image name
}

// SnapshotID locates the RBD snapshot behind a CSI snapshot.
type SnapshotID struct {
	ClusterID string
	Pool      int64
	Namespace string
	ImageID   string // ID of the source image
	Snap      string // RBD snapshot name
}

// ErrIDTooLong is wrapped by Encode errors for IDs over MaxIDLength.
var ErrIDTooLong = errors.New("ID longer than 128 bytes")

// String encodes the ID without checking it; use Encode to check.
func (v VolumeID) String() string {
	var b strings.Builder
	b.WriteString("v1-")
	writeField(&b, v.ClusterID)
	b.WriteString(strconv.FormatInt(v.Pool, 16))
	b.WriteByte('-')
	writeField(&b, v.Namespace)
	b.WriteString(v.Image)
	return b.String()
}

// Encode checks the fields and returns the ID's string form.
func (v VolumeID) Encode() (string, error) {
	if err := v.check(); err != nil {
		return "", err
	}
	s := v.String()
	if len(s) > MaxIDLength {
		return "", fmt.Errorf("volume %w: %d bytes for cluster ID %q (%d bytes), namespace %q (%d bytes) and image %q (%d bytes); shorten the clusterID, radosNamespace or volumeNamePrefix",
			ErrIDTooLong, len(s), v.ClusterID, len(v.ClusterID), v.Namespace, len(v.Namespace), v.Image, len(v.Image))
	}
	return s, nil
}

func (v VolumeID) check() error {
	if err := checkField("cluster ID", v.ClusterID, false); err != nil {
		return err
	}
	if v.Pool < 0 {
		return fmt.Errorf("pool ID %d is negative", v.Pool)
	}
	if err := checkField("namespace", v.Namespace, true); err != nil {
		return err
	}
	return checkName("image name", v.Image)
}

// ParseVolumeID decodes a volume ID.
func ParseVolumeID(s string) (VolumeID, error) {
	var v VolumeID
	p := idParser{s: s, what: "volume ID"}
	p.literal("v1-")
	v.ClusterID = p.field()
	v.Pool = p.pool()
	v.Namespace = p.field()
	v.Image = p.rest()
	if p.err != nil {
		return VolumeID{}, p.err
	}
	if len(s) > MaxIDLength {
		return VolumeID{}, fmt.Errorf("volume %w", ErrIDTooLong)
	}
	if err := v.check(); err != nil {
		return VolumeID{}, fmt.Errorf("volume ID %q: %w", s, err)
	}
	return v, nil
}

// String encodes the ID without checking it; use Encode to check.
func (s SnapshotID) String() string {
	var b strings.Builder
	b.WriteString("s1-")
	writeField(&b, s.ClusterID)
	b.WriteString(strconv.FormatInt(s.Pool, 16))
	b.WriteByte('-')
	writeField(&b, s.Namespace)
	writeField(&b, s.ImageID)
	b.WriteString(s.Snap)
	return b.String()
}

// Encode checks the fields and returns the ID's string form.
func (s SnapshotID) Encode() (string, error) {
	if err := s.check(); err != nil {
		return "", err
	}
	str := s.String()
	if len(str) > MaxIDLength {
		return "", fmt.Errorf("snapshot %w: %d bytes for cluster ID %q (%d bytes), namespace %q (%d bytes), image ID %q and snapshot %q (%d bytes); shorten the clusterID, radosNamespace or snapshotNamePrefix",
			ErrIDTooLong, len(str), s.ClusterID, len(s.ClusterID), s.Namespace, len(s.Namespace), s.ImageID, s.Snap, len(s.Snap))
	}
	return str, nil
}

func (s SnapshotID) check() error {
	if err := checkField("cluster ID", s.ClusterID, false); err != nil {
		return err
	}
	if s.Pool < 0 {
		return fmt.Errorf("pool ID %d is negative", s.Pool)
	}
	if err := checkField("namespace", s.Namespace, true); err != nil {
		return err
	}
	if s.ImageID == "" {
		return errors.New("image ID is empty")
	}
	for i := 0; i < len(s.ImageID); i++ {
		c := s.ImageID[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z') {
			return fmt.Errorf("image ID %q has a byte other than [0-9a-z]", s.ImageID)
		}
	}
	return checkName("snapshot name", s.Snap)
}

// ParseSnapshotID decodes a snapshot ID.
func ParseSnapshotID(str string) (SnapshotID, error) {
	var s SnapshotID
	p := idParser{s: str, what: "snapshot ID"}
	p.literal("s1-")
	s.ClusterID = p.field()
	s.Pool = p.pool()
	s.Namespace = p.field()
	s.ImageID = p.field()
	s.Snap = p.rest()
	if p.err != nil {
		return SnapshotID{}, p.err
	}
	if len(str) > MaxIDLength {
		return SnapshotID{}, fmt.Errorf("snapshot %w", ErrIDTooLong)
	}
	if err := s.check(); err != nil {
		return SnapshotID{}, fmt.Errorf("snapshot ID %q: %w", str, err)
	}
	return s, nil
}

func writeField(b *strings.Builder, f string) {
	b.WriteString(strconv.FormatInt(int64(len(f)), 16))
	b.WriteByte('-')
	b.WriteString(f)
	b.WriteByte('-')
}

func checkField(what, f string, emptyOK bool) error {
	if f == "" && !emptyOK {
		return fmt.Errorf("%s is empty", what)
	}
	for i := 0; i < len(f); i++ {
		if f[i] < 0x21 || f[i] > 0x7e {
			return fmt.Errorf("%s %q has a byte outside printable ASCII (0x21-0x7e)", what, f)
		}
	}
	return nil
}

func checkName(what, n string) error {
	if err := checkField(what, n, false); err != nil {
		return err
	}
	if strings.ContainsAny(n, "/@") {
		return fmt.Errorf("%s %q contains '/' or '@'", what, n)
	}
	return nil
}

// idParser reads the dash-separated, length-prefixed fields of an ID; the
// first error sticks and later reads return zero values.
type idParser struct {
	s    string
	what string
	err  error
}

func (p *idParser) fail(format string, args ...any) {
	if p.err == nil {
		p.err = fmt.Errorf("%s at %s: %s", p.what, quoteID(p.s), fmt.Sprintf(format, args...))
	}
}

// quoteID quotes an ID, or the rest of one, for an error message: at most
// MaxIDLength bytes of it, so that an error about a megabyte of garbage
// stays short and costs no more than the garbage itself.
func quoteID(s string) string {
	if len(s) <= MaxIDLength {
		return strconv.Quote(s)
	}
	return fmt.Sprintf("%q... (%d bytes)", s[:MaxIDLength], len(s))
}

func (p *idParser) literal(l string) {
	if p.err != nil {
		return
	}
	if !strings.HasPrefix(p.s, l) {
		p.fail("does not start with %q", l)
		return
	}
	p.s = p.s[len(l):]
}

// hex reads a canonical lower-case hex number ending in '-'.
func (p *idParser) hex() int64 {
	if p.err != nil {
		return 0
	}
	i := strings.IndexByte(p.s, '-')
	if i <= 0 || i > 15 {
		p.fail("expected a hex number before '-'")
		return 0
	}
	h := p.s[:i]
	if len(h) > 1 && h[0] == '0' {
		p.fail("hex number %q has leading zeros", h)
		return 0
	}
	for j := 0; j < len(h); j++ {
		if !(h[j] >= '0' && h[j] <= '9' || h[j] >= 'a' && h[j] <= 'f') {
			p.fail("%q is not lower-case hex", h)
			return 0
		}
	}
	n, err := strconv.ParseInt(h, 16, 64)
	if err != nil {
		p.fail("%q: %v", h, err)
		return 0
	}
	p.s = p.s[i+1:]
	return n
}

func (p *idParser) pool() int64 { return p.hex() }

// field reads LEN "-" bytes "-".
func (p *idParser) field() string {
	n := p.hex()
	if p.err != nil {
		return ""
	}
	if int64(len(p.s)) < n+1 || p.s[n] != '-' {
		p.fail("field of length %d does not fit", n)
		return ""
	}
	f := p.s[:n]
	p.s = p.s[n+1:]
	return f
}

func (p *idParser) rest() string {
	if p.err != nil {
		return ""
	}
	r := p.s
	p.s = ""
	return r
}
