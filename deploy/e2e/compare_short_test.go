package e2e

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCompareObjects(t *testing.T) {
	a, err := DecodeObjects([]byte(`{"kind":"List","items":[
		{"kind":"Namespace","metadata":{"name":"p"}},
		{"kind":"DaemonSet","metadata":{"name":"n","namespace":"p","labels":{"app.kubernetes.io/part-of":"purerbd"}},
		 "spec":{"template":{"metadata":{"labels":{"c":"node"}},"spec":{"containers":[{"args":["--a","--b"]}]}}}}]}`))
	require.NoError(t, err)
	b, err := DecodeObjects([]byte(`{"kind":"DaemonSet","metadata":{"name":"n","namespace":"p","labels":{"app.kubernetes.io/part-of":"purerbd","helm.sh/chart":"x-1"}},
		 "spec":{"template":{"metadata":{"labels":{"c":"node","app.kubernetes.io/instance":"r"},"annotations":{"checksum/config":"ab"}},"spec":{"containers":[{"args":["--a","--b"]}]}}}}
		{"kind":"Secret","metadata":{"name":"s","namespace":"p"}}`))
	require.NoError(t, err)
	require.Len(t, a, 2)
	require.Len(t, b, 2)
	for _, o := range b {
		StripHelmMeta(o)
	}
	assert.Empty(t, CompareObjects(a, b, []string{"Namespace"}, []string{"Secret"}))
	assert.Equal(t, []string{"Namespace//p: only in the first", "Secret/p/s: only in the second"},
		CompareObjects(a, b, nil, nil))

	b[0]["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)["args"] = []any{"--a", "--c"}
	assert.Equal(t, []string{`DaemonSet/p/n.spec.template.spec.containers[0].args[1]: "--b" ≠ "--c"`},
		CompareObjects(a, b, []string{"Namespace"}, []string{"Secret"}))
	_, err = DecodeObjects([]byte(`{"kind":`))
	assert.Error(t, err)
}
