// Package kubeapi reads the few Kubernetes objects the plugin needs from
// the API server, as a pod does: the in-cluster address from the
// KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT variables, the
// service account's token and CA from their mount. It is plain HTTPS and
// JSON, so the plugin needs no Kubernetes client library.
package kubeapi

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// ServiceAccountDir is where Kubernetes mounts a pod's service account
// token and the cluster's CA.
const ServiceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount"

// ErrNotInCluster is returned by InCluster outside a pod, or in a pod
// whose service account token is not mounted.
var ErrNotInCluster = errors.New("kubeapi: not in a Kubernetes pod with a service account token")

// Client talks to one API server.
type Client struct {
	base      *url.URL
	tokenFile string
	http      *http.Client
}

// Config describes an API server.
type Config struct {
	// URL of the API server, e.g. https://10.96.0.1:443.
	URL string
	// TokenFile holds the bearer token; it is read for every request,
	// as Kubernetes rotates it.
	TokenFile string
	// CAFile holds the CA certificates the server's certificate must
	// chain to.
	CAFile string
}

// InCluster returns the configuration of the API server of the pod this
// process runs in, reading the service account from dir
// (ServiceAccountDir in a pod).
func InCluster(dir string) (Config, error) {
	host, port := os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT")
	if host == "" || port == "" {
		return Config{}, fmt.Errorf("%w: KUBERNETES_SERVICE_HOST or KUBERNETES_SERVICE_PORT unset", ErrNotInCluster)
	}
	cfg := Config{
		URL:       "https://" + net.JoinHostPort(host, port),
		TokenFile: filepath.Join(dir, "token"),
		CAFile:    filepath.Join(dir, "ca.crt"),
	}
	if _, err := os.Stat(cfg.TokenFile); err != nil {
		return Config{}, fmt.Errorf("%w: %v (is automountServiceAccountToken false?)", ErrNotInCluster, err)
	}
	return cfg, nil
}

// New returns a client for cfg.
func New(cfg Config) (*Client, error) {
	u, err := url.Parse(cfg.URL)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("kubeapi: API server URL %q: want https://host:port", cfg.URL)
	}
	pem, err := os.ReadFile(cfg.CAFile)
	if err != nil {
		return nil, fmt.Errorf("kubeapi: reading the CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("kubeapi: no certificate in %s", cfg.CAFile)
	}
	tr := &http.Transport{
		TLSClientConfig:     &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
		TLSHandshakeTimeout: 10 * time.Second,
		Proxy:               nil, // the API server is reached directly, as kubelet's pods do
	}
	return &Client{base: u, tokenFile: cfg.TokenFile, http: &http.Client{Transport: tr}}, nil
}

// StatusError is an answer of the API server other than 200.
type StatusError struct {
	Code    int
	Message string
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("kubeapi: %d %s: %s", e.Code, http.StatusText(e.Code), e.Message)
}

// get decodes the object at path into v.
func (c *Client) get(ctx context.Context, path string, v any) error {
	token, err := os.ReadFile(c.tokenFile)
	if err != nil {
		return fmt.Errorf("kubeapi: reading the service account token: %w", err)
	}
	u := *c.base
	u.Path = path
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
	req.Header.Set("Accept", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("kubeapi: GET %s: %w", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return fmt.Errorf("kubeapi: GET %s: %w", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		var st struct {
			Message string `json:"message"`
		}
		_ = json.Unmarshal(body, &st)
		return &StatusError{Code: resp.StatusCode, Message: st.Message}
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("kubeapi: GET %s: decoding: %w", path, err)
	}
	return nil
}

// NodeLabels returns the labels of the node called name.
func (c *Client) NodeLabels(ctx context.Context, name string) (map[string]string, error) {
	if name == "" || strings.ContainsAny(name, "/?#") {
		return nil, fmt.Errorf("kubeapi: node name %q", name)
	}
	var node struct {
		Metadata struct {
			Labels map[string]string `json:"labels"`
		} `json:"metadata"`
	}
	if err := c.get(ctx, "/api/v1/nodes/"+name, &node); err != nil {
		return nil, fmt.Errorf("node %s: %w", name, err)
	}
	return node.Metadata.Labels, nil
}

// SecretData returns the data of the Secret name in namespace, decoded
// (the API server sends it base64). The values are secrets: callers
// never log them.
func (c *Client) SecretData(ctx context.Context, namespace, name string) (map[string]string, error) {
	for _, s := range []string{namespace, name} {
		if s == "" || strings.ContainsAny(s, "/?#") {
			return nil, fmt.Errorf("kubeapi: secret %q in namespace %q", name, namespace)
		}
	}
	var sec struct {
		Data map[string][]byte `json:"data"`
	}
	if err := c.get(ctx, "/api/v1/namespaces/"+namespace+"/secrets/"+name, &sec); err != nil {
		return nil, fmt.Errorf("secret %s/%s: %w", namespace, name, err)
	}
	out := make(map[string]string, len(sec.Data))
	for k, v := range sec.Data {
		out[k] = string(v)
	}
	return out, nil
}
