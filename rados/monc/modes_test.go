package monc

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/purerbd/purerbd/rados/msgr"
	"github.com/purerbd/purerbd/rados/radostest"
)

// TestModes connects to clusters forced to crc and to secure mode, and
// checks that a client insisting on the other mode is refused at once.
func TestModes(t *testing.T) {
	for _, tc := range []struct {
		cluster string
		want    msgr.ConnMode
		other   msgr.Mode
	}{
		{radostest.ModeCRC, msgr.ConnModeCRC, msgr.ModeSecure},
		{radostest.ModeSecure, msgr.ConnModeSecure, msgr.ModeCRC},
	} {
		t.Run(tc.cluster, func(t *testing.T) {
			t.Parallel()
			cl := radostest.New(t, radostest.Options{Mode: tc.cluster, Pool: "-"})
			c := connect(t, adminConfig(t, cl))
			if si := c.Session(); si.Mode != tc.want {
				t.Errorf("session mode %s, want %s", si.Mode, tc.want)
			}
			compareWithCLI(t, c, cl, map[string]any{"prefix": "mon dump"}, "mon", "dump")

			cfg := adminConfig(t, cl)
			cfg.Mode = tc.other
			t0 := time.Now()
			bad, err := New(context.Background(), cfg)
			if err == nil {
				bad.Close()
				t.Fatalf("a %v client connected to a %s cluster", tc.other, tc.cluster)
			}
			t.Logf("%v", err)
			if !finalError(err) || !errors.As(err, new(*HuntError)) {
				t.Errorf("want a final HuntError, got %v", err)
			}
			if took := time.Since(t0); took > 3*time.Second {
				t.Errorf("refusal took %v", took)
			}
		})
	}
}
