package e2e_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestChooseScenarios(t *testing.T) {
	all := []scenario{{name: "a"}, {name: "b"}, {name: "c"}}
	names := func(l []scenario) []string {
		var n []string
		for _, sc := range l {
			n = append(n, sc.name)
		}
		return n
	}
	got, err := chooseScenarios(all, "")
	require.NoError(t, err)
	assert.Equal(t, []string{"a", "b", "c"}, names(got))
	got, err = chooseScenarios(all, " c, a ,")
	require.NoError(t, err)
	assert.Equal(t, []string{"a", "c"}, names(got), "in definition order")
	_, err = chooseScenarios(all, "a,x")
	assert.ErrorContains(t, err, "no scenario x (there are: a, b, c)")
}
