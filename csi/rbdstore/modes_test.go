package rbdstore_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purerbd/purerbd/csi"
	"github.com/purerbd/purerbd/csi/rbdstore"
	"github.com/purerbd/purerbd/rados"
	"github.com/purerbd/purerbd/rados/radostest"
)

// cephConf writes a ceph.conf holding text and loads it.
func cephConf(t *testing.T, text string) *rados.ConfFile {
	t.Helper()
	p := filepath.Join(t.TempDir(), "ceph.conf")
	require.NoError(t, os.WriteFile(p, []byte(text), 0o644))
	c, err := rados.LoadConfFile(p)
	require.NoError(t, err)
	return c
}

// listImages connects to cl with opts and reads the pool's image
// directory, within 20 s: a monitor session, then an OSD session.
func listImages(t *testing.T, cl *radostest.Cluster, opts rbdstore.Options) error {
	t.Helper()
	st := rbdstore.New(opts)
	defer st.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := st.Session(ctx, csi.Cluster{ID: cl.FSID, Monitors: cl.MonAddrs}, csi.Credentials{ID: "admin", Key: cl.AdminKey})
	if err != nil {
		return err
	}
	pool, err := s.LookupPool(ctx, cl.Pool)
	require.NoError(t, err)
	_, err = s.ListImages(ctx, pool, "")
	return err
}

// TestConnectionModesOnCeph connects to a cluster whose every daemon
// accepts secure mode only: Ceph's default preferences negotiate it, a
// ceph.conf asking for secure works, and a client told to use crc
// (--ms-mode crc) is refused at once with an error that says so.
func TestConnectionModesOnCeph(t *testing.T) {
	t.Parallel()
	cl := radostest.New(t, radostest.Options{Mode: radostest.ModeSecure})
	require.NoError(t, listImages(t, cl, rbdstore.Options{}), "Ceph's defaults negotiate secure")
	require.NoError(t, listImages(t, cl, rbdstore.Options{
		Conf: cephConf(t, "[global]\n\tms_client_mode = secure\n\tms_mon_client_mode = secure\n")}))
	t0 := time.Now()
	err := listImages(t, cl, rbdstore.Options{MsMode: "crc",
		Conf: cephConf(t, "[client]\n\tms_client_mode = secure\n\tms_mon_client_mode = secure\n")})
	require.ErrorIs(t, err, csi.ErrUnavailable)
	assert.Contains(t, err.Error(), `the monitors refuse connection mode "crc"`)
	assert.Less(t, time.Since(t0), 20*time.Second, "refused at once, not after a timeout")
	t.Logf("crc client on a secure cluster: %v", err)
}

// TestOSDConnectionModeOnCeph connects to a cluster whose monitors
// accept crc only and whose OSDs accept secure only: the mode ceph.conf
// sets for OSDs (ms_client_mode, per user or for every client) is the
// one the OSD sessions use, and the one for monitors
// (ms_mon_client_mode) is the monitors'.
func TestOSDConnectionModeOnCeph(t *testing.T) {
	t.Parallel()
	cl := radostest.New(t, radostest.Options{Conf: map[string]string{
		"ms_mon_service_mode": "crc",
		"ms_service_mode":     "secure",
	}})
	require.NoError(t, listImages(t, cl, rbdstore.Options{}), "Ceph's defaults negotiate crc with the monitors, secure with the OSDs")
	require.NoError(t, listImages(t, cl, rbdstore.Options{Conf: cephConf(t, "[client]\n\tms_client_mode = secure\n")}))

	// crc towards the OSDs: the monitor session works, no OSD session.
	err := listImages(t, cl, rbdstore.Options{
		Conf: cephConf(t, "[global]\n\tms_client_mode = secure\n[client.admin]\n\tms_client_mode = crc\n")})
	require.Error(t, err, "an OSD that accepts secure only served a crc client")
	t.Logf("crc towards secure OSDs: %v", err)

	// secure towards the monitors: refused there.
	err = listImages(t, cl, rbdstore.Options{Conf: cephConf(t, "[global]\n\tms_mon_client_mode = secure\n")})
	require.ErrorIs(t, err, csi.ErrUnavailable)
	assert.Contains(t, err.Error(), `the monitors refuse connection mode "secure"`)
	t.Logf("secure towards crc monitors: %v", err)
}

func TestOptionsCheck(t *testing.T) {
	assert.NoError(t, rbdstore.Options{}.Check())
	assert.NoError(t, rbdstore.Options{MsMode: "prefer-secure", Conf: cephConf(t, "[client]\nms_client_mode = secure crc\n")}.Check())
	assert.ErrorContains(t, rbdstore.Options{MsMode: "tls"}.Check(), "--ms-mode")
	assert.ErrorContains(t, rbdstore.Options{Conf: cephConf(t, "[global]\nms_mon_client_mode = plain\n")}.Check(), "ms_mon_client_mode")
}
