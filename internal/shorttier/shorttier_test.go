package shorttier

import "testing"

// TestSkip runs Skip in a subtest: under -short the subtest is skipped,
// otherwise it runs on.
func TestSkip(t *testing.T) {
	ran := false
	t.Run("sub", func(t *testing.T) {
		Skip(t, "a test double")
		ran = true
	})
	if ran == testing.Short() {
		t.Fatalf("with -short=%v the subtest ran past Skip: %v", testing.Short(), ran)
	}
}
