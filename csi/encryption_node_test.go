package csi

import (
	"bytes"
	"context"
	"crypto/rand"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// memImage is a NodeImage in memory with image metadata, as the node's
// rbdstore images have.
type memImage struct {
	mu       sync.Mutex
	data     []byte
	meta     map[string]string
	readOnly bool
	closed   bool
}

func (m *memImage) ReadAtContext(_ context.Context, p []byte, off int64) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if off >= int64(len(m.data)) {
		return 0, io.EOF
	}
	n := copy(p, m.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (m *memImage) WriteAtContext(_ context.Context, p []byte, off int64) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return copy(m.data[off:], p), nil
}

func (m *memImage) Size() int64                 { return int64(len(m.data)) }
func (m *memImage) ReadOnly() bool              { return m.readOnly }
func (m *memImage) Flush(context.Context) error { return nil }
func (m *memImage) Discard(ctx context.Context, off, length int64) error {
	return m.WriteZeroes(ctx, off, length)
}
func (m *memImage) WriteZeroes(_ context.Context, off, length int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	clear(m.data[off : off+length])
	return nil
}
func (m *memImage) AllocatedExtents(_ context.Context, off, length int64, fn func(off, length int64, allocated bool) error) error {
	return fn(off, length, true)
}
func (m *memImage) NotifySize(func(int64)) func() { return func() {} }
func (m *memImage) Close() error                  { m.closed = true; return nil }
func (m *memImage) Metadata(_ context.Context, key string) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	v, ok := m.meta[key]
	if !ok {
		return "", ErrNotFound
	}
	return v, nil
}
func (m *memImage) SetMetadata(_ context.Context, key, value string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.meta[key] = value
	return nil
}

// TestNodeOpensEncryptedVolumes: a volume the controller marked is
// formatted at its first open and marked encrypted; its plaintext starts
// after the 16 MiB header; reopened, it reads what was written; the
// header is one cryptsetup reads and opens with the passphrase; a wrong
// passphrase is PERMISSION_DENIED, none INVALID_ARGUMENT, a read-only
// first stage FAILED_PRECONDITION, and each closes the image. A volume
// without the mark is served as it is.
func TestNodeOpensEncryptedVolumes(t *testing.T) {
	ctx := context.Background()
	n := &NodeServer{log: slog.New(slog.DiscardHandler)}
	pass := []byte("correct horse battery staple")
	img := &memImage{data: make([]byte, 24<<20), meta: map[string]string{metaEncrypted: encryptionPrepared}}

	ro := &memImage{data: make([]byte, 24<<20), meta: map[string]string{metaEncrypted: encryptionPrepared}, readOnly: true}
	_, err := n.openEncrypted(ctx, ro, "vol-ro", pass)
	assert.Equal(t, codes.FailedPrecondition, status.Code(err), "%v", err)
	assert.True(t, ro.closed)

	plain, err := n.openEncrypted(ctx, img, "vol-1", pass)
	require.NoError(t, err)
	assert.Equal(t, encryptionDone, img.meta[metaEncrypted])
	assert.Equal(t, int64(8<<20), plain.Size())
	assert.Equal(t, "LUKS\xba\xbe", string(img.data[:6]))
	want := make([]byte, 1<<20)
	rand.Read(want)
	_, err = plain.WriteAtContext(ctx, want, 3<<20+511)
	require.NoError(t, err)
	assert.False(t, bytes.Contains(img.data, want[:4096]), "plaintext reached the image")

	again, err := n.openEncrypted(ctx, img, "vol-1", pass)
	require.NoError(t, err)
	got := make([]byte, len(want))
	_, err = again.ReadAtContext(ctx, got, 3<<20+511)
	require.NoError(t, err)
	assert.Equal(t, want, got)

	_, err = n.openEncrypted(ctx, img, "vol-1", []byte("wrong"))
	assert.Equal(t, codes.PermissionDenied, status.Code(err), "%v", err)
	assert.NotContains(t, err.Error(), "wrong")
	img.closed = false
	_, err = n.openEncrypted(ctx, img, "vol-1", nil)
	assert.Equal(t, codes.InvalidArgument, status.Code(err), "%v", err)
	assert.True(t, img.closed)

	bare := &memImage{data: make([]byte, 1<<20), meta: map[string]string{}}
	same, err := n.openEncrypted(ctx, bare, "vol-2", nil)
	require.NoError(t, err)
	assert.Same(t, NodeImage(bare), same)

	// cryptsetup reads the header and opens its keyslot.
	dir := t.TempDir()
	file := filepath.Join(dir, "header")
	require.NoError(t, os.WriteFile(file, img.data[:16<<20], 0o600))
	out, err := exec.Command("cryptsetup", "luksDump", file).CombinedOutput()
	require.NoError(t, err, "%s", out)
	for _, w := range []string{"Version:       \t2", "aes-xts-plain64", "sector: 4096", "offset: 16777216 [bytes]", "argon2id"} {
		assert.Contains(t, string(out), w)
	}
	cmd := exec.Command("cryptsetup", "open", "--test-passphrase", "--key-file", "-", file)
	cmd.Stdin = strings.NewReader(string(pass))
	out, err = cmd.CombinedOutput()
	assert.NoError(t, err, "cryptsetup open --test-passphrase: %s", out)
}

// TestNodeOpensKMSVolumes: a volume made under a "metadata" KMS section
// is formatted with its own key, opened from its sealed copy with the
// passphrase of the Secret the section names (in the recorded claim
// namespace) or of the node-stage secret; that key is the LUKS
// passphrase, as ceph-csi uses it (cryptsetup opens the keyslot with
// it); a KMS passphrase that does not open the key is PERMISSION_DENIED,
// a sealed key without its KMS recorded FAILED_PRECONDITION.
func TestNodeOpensKMSVolumes(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	kmsPath := filepath.Join(dir, "kms.json")
	require.NoError(t, os.WriteFile(kmsPath, []byte(`{"k8s": {"encryptionKMSType": "metadata", "secretName": "kms-pass"}, "sc": {"encryptionKMSType": "metadata"}}`), 0o600))
	secretPass := "from the kubernetes secret"
	secrets := func(_ context.Context, ns, name string) (map[string]string, error) {
		if ns != "team-a" || name != "kms-pass" {
			return nil, ErrNotFound
		}
		return map[string]string{secretEncryptionPassphrase: secretPass}, nil
	}
	keys := VolumeKeys{KMSConfigPath: kmsPath, Secrets: secrets}
	dek, err := newDEK()
	require.NoError(t, err)
	sealed, err := sealDEK([]byte(secretPass), "vol-k", dek)
	require.NoError(t, err)
	img := &memImage{data: make([]byte, 20<<20), meta: map[string]string{metaEncrypted: encryptionPrepared,
		metaDEK: sealed, metaKMS: "k8s", metaOwner: "team-a"}}
	log := slog.New(slog.DiscardHandler)

	plain, err := OpenEncrypted(ctx, img, "vol-k", keys, log)
	require.NoError(t, err)
	_, err = plain.WriteAtContext(ctx, []byte("hello"), 0)
	require.NoError(t, err)
	again, err := OpenEncrypted(ctx, img, "vol-k", keys, log)
	require.NoError(t, err)
	got := make([]byte, 5)
	_, err = again.ReadAtContext(ctx, got, 0)
	require.NoError(t, err)
	assert.Equal(t, "hello", string(got))

	// The LUKS passphrase is the key itself.
	file := filepath.Join(dir, "header")
	require.NoError(t, os.WriteFile(file, img.data[:16<<20], 0o600))
	cmd := exec.Command("cryptsetup", "open", "--test-passphrase", "--key-file", "-", file)
	cmd.Stdin = strings.NewReader(dek)
	out, err := cmd.CombinedOutput()
	assert.NoError(t, err, "cryptsetup opens the keyslot with the volume's key: %s", out)

	// The sealed key belongs to vol-k: under another ID it opens nothing.
	_, err = OpenEncrypted(ctx, img, "vol-other", keys, log)
	assert.Equal(t, codes.PermissionDenied, status.Code(err), "%v", err)
	// A section without secretName takes the node-stage secret's.
	img.meta[metaKMS] = "sc"
	_, err = OpenEncrypted(ctx, img, "vol-k", VolumeKeys{KMSConfigPath: kmsPath, Passphrase: []byte(secretPass)}, log)
	assert.NoError(t, err)
	_, err = OpenEncrypted(ctx, img, "vol-k", VolumeKeys{KMSConfigPath: kmsPath}, log)
	assert.Equal(t, codes.InvalidArgument, status.Code(err), "%v", err)
	delete(img.meta, metaKMS)
	_, err = OpenEncrypted(ctx, img, "vol-k", keys, log)
	assert.Equal(t, codes.FailedPrecondition, status.Code(err), "%v", err)
}

// TestNodeUnlocksOneAtATime: an encrypted volume's LUKS format or
// unlock waits while another holds the node's unlock token (each holds
// its KDF's memory while it runs); one whose context ends while waiting
// fails with the context's code, having written nothing, and closes its
// image; once the token is free it proceeds and gives the token back.
func TestNodeUnlocksOneAtATime(t *testing.T) {
	n, _ := newTestNode(t)
	require.Equal(t, 1, cap(n.unlocks))
	pass := []byte("correct horse battery staple")
	img := &memImage{data: make([]byte, 24<<20), meta: map[string]string{metaEncrypted: encryptionPrepared}}

	n.unlocks <- struct{}{} // another volume's unlock under way
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err := n.openEncrypted(ctx, img, "vol-1", pass)
	assert.Equal(t, codes.DeadlineExceeded, status.Code(err), "%v", err)
	assert.True(t, img.closed)
	assert.Equal(t, encryptionPrepared, img.meta[metaEncrypted])
	assert.NotEqual(t, "LUKS\xba\xbe", string(img.data[:6]), "a header was written while another unlock held the token")

	img.closed = false
	done := make(chan error, 1)
	go func() {
		_, err := n.openEncrypted(context.Background(), img, "vol-1", pass)
		done <- err
	}()
	<-n.unlocks // that other unlock ends
	require.NoError(t, <-done)
	assert.Equal(t, encryptionDone, img.meta[metaEncrypted])
	assert.Empty(t, n.unlocks, "the token was not given back")
}
