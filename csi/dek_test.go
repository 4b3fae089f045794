package csi

import (
	"encoding/base64"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purerbd/purerbd/internal/alloctest"
)

// TestDEKSealing: a sealed DEK opens with the KMS passphrase and the
// volume ID it was sealed for, and with nothing else; a DEK is 20 random
// bytes in URL-safe base64, as ceph-csi makes them.
func TestDEKSealing(t *testing.T) {
	dek, err := newDEK()
	require.NoError(t, err)
	raw, err := base64.URLEncoding.DecodeString(dek)
	require.NoError(t, err)
	assert.Len(t, raw, 20)
	other, _ := newDEK()
	assert.NotEqual(t, dek, other)

	sealed, err := sealDEK([]byte("kms pass"), "vol-1", dek)
	require.NoError(t, err)
	got, err := openDEK([]byte("kms pass"), "vol-1", sealed)
	require.NoError(t, err)
	assert.Equal(t, dek, got)
	_, err = openDEK([]byte("kms pass"), "vol-2", sealed)
	assert.ErrorIs(t, err, errWrongKMSPassphrase)
	_, err = openDEK([]byte("other"), "vol-1", sealed)
	assert.ErrorIs(t, err, errWrongKMSPassphrase)
	assert.NotContains(t, sealed, dek)
}

// cephCSISealedVector is a DEK sealed as ceph-csi's secretsMetadataKMS
// seals one, made by an independent implementation (Python's
// hashlib.scrypt and the cryptography package's AESGCM) with ceph-csi's
// parameters: scrypt N=32768, r=8, p=1 to a 32-byte key, the volume ID as
// salt, a 12-byte nonce, and encoding/json's standard base64.
const cephCSISealedVector = `{"dek":"0GHNPyUOiVqNczUgB9OPCTnT9ijUCc1/IuE7VAPyl02zSAM1Ntfl+8qxlBM=","nonce":"AQIDBAUGBwgJCgsM"}`

// TestDEKFromCephCSI opens that vector.
func TestDEKFromCephCSI(t *testing.T) {
	sealed := cephCSISealedVector
	got, err := openDEK([]byte("ceph-csi kms passphrase"), "0001-0024-b6f6c1d2-8a9e-4e4b-9a43-3f0b8d6c3e07-0000000000000002-5f6b6a8e-4b2c-11ef-9d5a-0242ac110003", sealed)
	require.NoError(t, err)
	assert.Equal(t, "qS8p0S1Ezl4U2E3CMNZbOhF3BZE=", got)
}

// FuzzParseSealedDEK: metaDEK's value comes from the cluster; decoding
// it never panics and allocates in proportion.
func FuzzParseSealedDEK(f *testing.F) {
	f.Add(cephCSISealedVector)
	f.Add(`{"dek":"","nonce":""}`)
	f.Add(`{"dek":"AAAA","nonce":"AAAAAAAAAAAAAAAA"}`)
	f.Add(`[1,2,3]`)
	f.Fuzz(func(t *testing.T, s string) {
		alloctest.Check(t, len(s), func() { _, _ = parseSealedDEK(s) })
	})
}
