package csi

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purerbd/purerbd/nbd"
	"github.com/purerbd/purerbd/nbd/nbdtest"
)

// TestNodeDeviceAbilities serves the backend the node hands the kernel
// for a volume (attachConfig) over a userspace connection: it has every
// ability an RBD image has, write zeroes that deallocate and block status
// included, as the CLI's export of an image does; a read-only volume is
// served read-only.
func TestNodeDeviceAbilities(t *testing.T) {
	const mib = 1 << 20
	ctx := context.Background()
	n, op := newTestNode(t)
	p := filepath.Join(op.dir, "2", "img")
	require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
	require.NoError(t, os.WriteFile(p, nil, 0o600))
	require.NoError(t, os.Truncate(p, 4*mib))
	vid := VolumeID{ClusterID: testClusterID, Pool: 2, Image: "img"}
	cred := Credentials{ID: "u", Key: "good-key"}

	img, err := op.OpenImage(ctx, Cluster{}, cred, vid, OpenImageOptions{})
	require.NoError(t, err)
	defer img.Close()
	cfg, err := n.attachConfig(img, testRecord(vid.String()))
	require.NoError(t, err)
	srv := nbdtest.Start(t, nbd.Config{Exports: []*nbd.Export{{Name: "v", Backend: cfg.Backend}}})
	c, err := nbdtest.Dial(ctx, "unix", srv.Socket, nbdtest.Options{Export: "v", BlockStatus: true})
	require.NoError(t, err)
	defer c.Close()
	const all = nbdtest.TFlagHasFlags | nbdtest.TFlagSendFlush | nbdtest.TFlagSendFUA | nbdtest.TFlagSendTrim |
		nbdtest.TFlagSendZeroes | nbdtest.TFlagSendFastZero | nbdtest.TFlagMultiConn | nbdtest.TFlagSendCache
	assert.Equal(t, fmt.Sprintf("%#x", all|nbdtest.TFlagSendDF), fmt.Sprintf("%#x", c.Flags), "transmission flags")

	// 2 MiB of data, then a hole
	require.NoError(t, c.WriteAt(ctx, bytes.Repeat([]byte{9}, 2*mib), 0, 0))
	hole := uint32(nbd.ExtentHole | nbd.ExtentZero)
	ext, err := c.BlockStatus(ctx, 0, 4*mib, 0)
	require.NoError(t, err)
	assert.Equal(t, []nbdtest.Extent{{Length: 2 * mib}, {Length: 2 * mib, Flags: hole}}, ext, "block status")

	// WRITE_ZEROES without NO_HOLE deallocates the first MiB
	_, err = c.Do(ctx, nbdtest.Cmd{Type: nbdtest.CmdWriteZeroes, Offset: 0, Length: mib})
	require.NoError(t, err)
	ext, err = c.BlockStatus(ctx, 0, 4*mib, 0)
	require.NoError(t, err)
	assert.Equal(t, []nbdtest.Extent{{Length: mib, Flags: hole}, {Length: mib}, {Length: 2 * mib, Flags: hole}}, ext,
		"block status after write zeroes")
	back := make([]byte, 2*mib)
	require.NoError(t, c.ReadAt(ctx, back, 0))
	assert.Equal(t, append(make([]byte, mib), bytes.Repeat([]byte{9}, mib)...), back)

	// read-only
	ro, err := op.OpenImage(ctx, Cluster{}, cred, vid, OpenImageOptions{ReadOnly: true})
	require.NoError(t, err)
	defer ro.Close()
	rec := testRecord(vid.String())
	rec.ReadOnly = true
	cfg, err = n.attachConfig(ro, rec)
	require.NoError(t, err)
	f, err := (&nbd.Export{Backend: cfg.Backend}).TransmissionFlags()
	require.NoError(t, err)
	assert.NotZero(t, f&nbdtest.TFlagReadOnly, "a read-only volume's backend is read-only: flags %#x", f)
}
