package e2e

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseMetrics(t *testing.T) {
	in := []byte(`# HELP purerbd_volume_written_bytes_total Bytes written.
# TYPE purerbd_volume_written_bytes_total counter
purerbd_volume_written_bytes_total{volume_id="v1-a"} 4096
purerbd_volume_written_bytes_total{volume_id="v1-b"} 1.5e+06
purerbd_volume_reattaches_total{reason="takeover",volume_id="v1-a"} 1
purerbd_volume_reattaches_total{reason="connections_lost",volume_id="v1-a"} 0
odd{l="a \"quoted\" \\ value"} 2 1700000000000
go_goroutines 12
`)
	s, err := ParseMetrics(in)
	require.NoError(t, err)
	require.Len(t, s, 6)
	v, ok := s.Sum("purerbd_volume_written_bytes_total", nil)
	assert.True(t, ok)
	assert.Equal(t, 1504096.0, v)
	v, ok = s.Sum("purerbd_volume_reattaches_total", map[string]string{"volume_id": "v1-a", "reason": "takeover"})
	assert.True(t, ok)
	assert.Equal(t, 1.0, v)
	_, ok = s.Sum("purerbd_volume_reattaches_total", map[string]string{"volume_id": "v1-c"})
	assert.False(t, ok)
	assert.Equal(t, `a "quoted" \ value`, s[4].Labels["l"])
	v, _ = s.Sum("go_goroutines", nil)
	assert.Equal(t, 12.0, v)

	_, err = ParseMetrics([]byte("not a series line with spaces\n"))
	assert.Error(t, err)
	_, err = ParseMetrics([]byte("x{a=\"b\"} notanumber\n"))
	assert.Error(t, err)
}
