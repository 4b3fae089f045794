package e2e

import (
	"fmt"
	"os"
	"path/filepath"
)

// writeKubeconfig writes a kubeconfig for server that authenticates with
// the client certificate <name>.crt, which its reader finds with ca.crt
// in certDir.
func writeKubeconfig(path, server, certDir, name string) error {
	c := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: e2e
  cluster:
    server: %s
    certificate-authority: %s
users:
- name: %s
  user:
    client-certificate: %s
    client-key: %s
contexts:
- name: e2e
  context: {cluster: e2e, user: %s}
current-context: e2e
`, server, filepath.Join(certDir, "ca.crt"), name, filepath.Join(certDir, name+".crt"), filepath.Join(certDir, name+".key"), name)
	if err := os.WriteFile(path, []byte(c), 0o600); err != nil {
		return fmt.Errorf("kubeconfig %s: %w", name, err)
	}
	return nil
}
