package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// runJSON runs the workload command and decodes its last stdout line.
func runJSON(t *testing.T, args ...string) (int, map[string]any, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), args, &out, &errb)
	lines := bytes.Split(bytes.TrimSpace(out.Bytes()), []byte("\n"))
	var last map[string]any
	if len(lines[len(lines)-1]) > 0 {
		require.NoError(t, json.Unmarshal(lines[len(lines)-1], &last), "stdout: %s", out.String())
	}
	return code, last, errb.String()
}

// TestWriteVerify writes records to a file, verifies them, then damages
// one record's payload and checks verify names it and fails.
func TestWriteVerify(t *testing.T) {
	path := filepath.Join(t.TempDir(), "data")
	code, w, stderr := runJSON(t, "write", "--path", path, "--count", "50", "--size", "4k", "--seed", "9")
	require.Equal(t, 0, code, stderr)
	assert.Equal(t, true, w["ok"])
	assert.EqualValues(t, 50*4096, w["bytes"])
	st, err := os.Stat(path)
	require.NoError(t, err)
	assert.EqualValues(t, 50*4096, st.Size())

	code, v, stderr := runJSON(t, "verify", "--path", path, "--count", "50", "--size", "4k", "--seed", "9")
	require.Equal(t, 0, code, stderr)
	assert.Equal(t, true, v["ok"])
	assert.NotContains(t, v, "first_bad")

	// another seed: every record belongs to another run
	code, v, _ = runJSON(t, "verify", "--path", path, "--count", "50", "--size", "4k", "--seed", "10")
	assert.Equal(t, 1, code)
	assert.EqualValues(t, 50, v["bad"])
	assert.EqualValues(t, 0, v["first_bad"])

	// one flipped byte in record 17's payload
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	require.NoError(t, err)
	b := []byte{0}
	_, err = f.ReadAt(b, 17*4096+1000)
	require.NoError(t, err)
	b[0] ^= 1
	_, err = f.WriteAt(b, 17*4096+1000)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	code, v, stderr = runJSON(t, "verify", "--path", path, "--count", "50", "--size", "4k", "--seed", "9")
	assert.Equal(t, 1, code)
	assert.Equal(t, false, v["ok"])
	assert.EqualValues(t, 1, v["bad"])
	assert.EqualValues(t, 17, v["first_bad"])
	assert.Contains(t, v["first_error"], "record 17: checksum mismatch")
	assert.Contains(t, stderr, "record 17")

	// more records than were written: the rest are missing
	code, v, _ = runJSON(t, "verify", "--path", path, "--count", "52", "--size", "4k", "--seed", "9")
	assert.Equal(t, 1, code)
	assert.EqualValues(t, 3, v["bad"])
	assert.EqualValues(t, 17, v["first_bad"])

	// records of another size
	code, _, _ = runJSON(t, "verify", "--path", path, "--count", "10", "--size", "8k", "--seed", "9")
	assert.Equal(t, 1, code)
}

// TestWriteVerifyDirect does the same through O_DIRECT, in the temp
// directory or, where its file system refuses O_DIRECT (tmpfs before
// Linux 6.6), in /var/tmp, which is on a disk.
func TestWriteVerifyDirect(t *testing.T) {
	dir := t.TempDir()
	f, err := openTarget(filepath.Join(dir, "probe"), true, true)
	if err != nil {
		dir, err = os.MkdirTemp("/var/tmp", "workload-direct-")
		require.NoError(t, err)
		t.Cleanup(func() { os.RemoveAll(dir) })
		f, err = openTarget(filepath.Join(dir, "probe"), true, true)
		require.NoError(t, err, "neither the temp directory nor /var/tmp takes O_DIRECT")
	}
	f.Close()
	path := filepath.Join(dir, "data")
	code, _, stderr := runJSON(t, "write", "--path", path, "--count", "8", "--size", "8k", "--direct")
	require.Equal(t, 0, code, stderr)
	code, v, stderr := runJSON(t, "verify", "--path", path, "--count", "8", "--size", "8k", "--direct")
	require.Equal(t, 0, code, stderr)
	assert.Equal(t, true, v["ok"])
}

func TestUsage(t *testing.T) {
	for _, args := range [][]string{
		nil,
		{"frobnicate"},
		{"write", "--count", "1"},
		{"write", "--path", "x", "--count", "0"},
		{"write", "--path", "x", "--count", "1", "--size", "100"},
		{"write", "--path", "x", "--count", "1", "--size", "512", "--direct"},
		{"verify", "--path", "x", "--count", "1", "extra"},
		{"stream", "--path", "x", "--size", "1x"},
		{"verify-stream", "--path", "x", "--last-index", "-2"},
	} {
		code := run(context.Background(), args, &bytes.Buffer{}, &bytes.Buffer{})
		assert.Equal(t, 2, code, "%q", args)
	}
	var s sizeFlag
	require.NoError(t, s.Set("64k"))
	assert.EqualValues(t, 65536, s)
	require.NoError(t, s.Set("1M"))
	assert.EqualValues(t, 1<<20, s)
}
