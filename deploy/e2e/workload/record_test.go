package main

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRecordRoundTrip checks that a record decodes as what was encoded,
// and that a change to any one byte of it, header or payload, is caught.
func TestRecordRoundTrip(t *testing.T) {
	buf := make([]byte, 1024)
	want := recordID{index: 41, seed: 7, ring: 16}
	encodeRecord(buf, want)
	got, err := decodeRecord(buf)
	require.NoError(t, err)
	assert.Equal(t, want, got)
	require.NoError(t, checkRecord(buf, want))

	other := make([]byte, 1024)
	encodeRecord(other, recordID{index: 42, seed: 7, ring: 16})
	assert.NotEqual(t, buf[headerSize:], other[headerSize:], "payloads differ from record to record")

	for _, off := range []int{0, 8, 12, 16, 24, 28, 32, 63, 64, 500, 1023} {
		c := append([]byte(nil), buf...)
		c[off] ^= 0x10
		err := checkRecord(c, want)
		require.Error(t, err, "byte %d changed", off)
		if off >= 8 {
			assert.ErrorIs(t, err, errCorrupt, "byte %d changed", off)
		} else {
			assert.ErrorIs(t, err, errEmpty, "magic byte %d changed", off)
		}
	}
	assert.ErrorContains(t, checkRecord(buf, recordID{index: 40, seed: 7, ring: 16}), "holds record 41")
	assert.ErrorContains(t, checkRecord(buf, recordID{index: 41, seed: 8, ring: 16}), "seed 7")
	assert.ErrorContains(t, checkRecord(buf, recordID{index: 41, seed: 7}), "ring of 16")
	_, err = decodeRecord(make([]byte, 1024))
	assert.True(t, errors.Is(err, errEmpty), "zeroes are no record: %v", err)
	_, err = decodeRecord(buf[:512])
	assert.Error(t, err, "a record cut short")
}

func TestCheckSize(t *testing.T) {
	for _, ok := range []int{512, 4096, 1 << 20} {
		assert.NoError(t, checkSize(ok))
	}
	for _, bad := range []int{0, 64, 511, 513, 4000} {
		assert.Error(t, checkSize(bad), "%d", bad)
	}
	assert.Error(t, checkDirect(512, true))
	assert.NoError(t, checkDirect(512, false))
	assert.NoError(t, checkDirect(8192, true))
}
