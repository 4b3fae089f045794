package kubeapi_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purerbd/purerbd/csi/kubeapi"
)

// apiServer answers GET /api/v1/nodes/<name> as the API server does, for
// the one node it knows, and only with the right bearer token. (The real
// API server is exercised by the Kubernetes end-to-end run.)
func apiServer(t *testing.T, token string) (*httptest.Server, string) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.Header.Get("Authorization") != "Bearer "+token:
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprint(w, `{"kind":"Status","message":"Unauthorized"}`)
		case r.URL.Path == "/api/v1/nodes/node-a" && r.Method == http.MethodGet:
			fmt.Fprint(w, `{"kind":"Node","metadata":{"name":"node-a","labels":{"topology.kubernetes.io/zone":"z1","kubernetes.io/hostname":"node-a"}}}`)
		case r.URL.Path == "/api/v1/namespaces/team-a/secrets/kms" && r.Method == http.MethodGet:
			// "pass phrase" and "x", base64 as the API server sends them
			fmt.Fprint(w, `{"kind":"Secret","metadata":{"name":"kms"},"data":{"encryptionPassphrase":"cGFzcyBwaHJhc2U=","other":"eA=="}}`)
		default:
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprintf(w, `{"kind":"Status","message":"nodes \"%s\" not found"}`, filepath.Base(r.URL.Path))
		}
	}))
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	require.NoError(t, os.WriteFile(filepath.Join(dir, "ca.crt"), ca, 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "token"), []byte(token+"\n"), 0o600))
	return srv, dir
}

func TestNodeLabels(t *testing.T) {
	srv, dir := apiServer(t, "tok-1")
	ctx := context.Background()
	c, err := kubeapi.New(kubeapi.Config{URL: srv.URL, TokenFile: filepath.Join(dir, "token"), CAFile: filepath.Join(dir, "ca.crt")})
	require.NoError(t, err)
	labels, err := c.NodeLabels(ctx, "node-a")
	require.NoError(t, err)
	assert.Equal(t, "z1", labels["topology.kubernetes.io/zone"])

	_, err = c.NodeLabels(ctx, "node-b")
	var se *kubeapi.StatusError
	require.True(t, errors.As(err, &se), "%v", err)
	assert.Equal(t, http.StatusNotFound, se.Code)
	assert.Contains(t, err.Error(), `nodes "node-b" not found`)

	_, err = c.NodeLabels(ctx, "../secrets")
	assert.ErrorContains(t, err, "node name")

	// the token is read for every request: a rotated one is used at once
	require.NoError(t, os.WriteFile(filepath.Join(dir, "token"), []byte("old"), 0o600))
	_, err = c.NodeLabels(ctx, "node-a")
	require.True(t, errors.As(err, &se), "%v", err)
	assert.Equal(t, http.StatusUnauthorized, se.Code)
}

func TestTLSIsVerified(t *testing.T) {
	srv, dir := apiServer(t, "tok")
	// a CA that did not sign the server's certificate
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "other-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	other := filepath.Join(t.TempDir(), "ca.crt")
	require.NoError(t, os.WriteFile(other, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600))
	c, err := kubeapi.New(kubeapi.Config{URL: srv.URL, TokenFile: filepath.Join(dir, "token"), CAFile: other})
	require.NoError(t, err)
	_, err = c.NodeLabels(context.Background(), "node-a")
	assert.ErrorContains(t, err, "certificate")
}

func TestInCluster(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	t.Setenv("KUBERNETES_SERVICE_PORT", "")
	_, err := kubeapi.InCluster(dir)
	assert.ErrorIs(t, err, kubeapi.ErrNotInCluster)

	t.Setenv("KUBERNETES_SERVICE_HOST", "fd00::1")
	t.Setenv("KUBERNETES_SERVICE_PORT", "443")
	_, err = kubeapi.InCluster(dir)
	assert.ErrorIs(t, err, kubeapi.ErrNotInCluster, "no token mounted")
	assert.ErrorContains(t, err, "automountServiceAccountToken")

	require.NoError(t, os.WriteFile(filepath.Join(dir, "token"), []byte("t"), 0o600))
	cfg, err := kubeapi.InCluster(dir)
	require.NoError(t, err)
	assert.Equal(t, "https://[fd00::1]:443", cfg.URL)
	assert.Equal(t, filepath.Join(dir, "ca.crt"), cfg.CAFile)
}

func TestSecretData(t *testing.T) {
	srv, dir := apiServer(t, "tok-2")
	ctx := context.Background()
	c, err := kubeapi.New(kubeapi.Config{URL: srv.URL, TokenFile: filepath.Join(dir, "token"), CAFile: filepath.Join(dir, "ca.crt")})
	require.NoError(t, err)
	data, err := c.SecretData(ctx, "team-a", "kms")
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"encryptionPassphrase": "pass phrase", "other": "x"}, data)
	_, err = c.SecretData(ctx, "team-b", "kms")
	var se *kubeapi.StatusError
	require.True(t, errors.As(err, &se), "%v", err)
	assert.Equal(t, http.StatusNotFound, se.Code)
	_, err = c.SecretData(ctx, "team-a/../x", "kms")
	assert.ErrorContains(t, err, "namespace")
}
