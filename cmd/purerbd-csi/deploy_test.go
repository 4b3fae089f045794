package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purerbd/purerbd/csi"
)

// manifest is the part of a Kubernetes object the checks look at.
type manifest struct {
	File       string         `json:"-"`
	APIVersion string         `json:"apiVersion"`
	Kind       string         `json:"kind"`
	Metadata   map[string]any `json:"metadata"`
	Spec       struct {
		AttachRequired *bool `json:"attachRequired"`
		Template       struct {
			Spec struct {
				Containers []struct {
					Name         string   `json:"name"`
					Image        string   `json:"image"`
					Args         []string `json:"args"`
					VolumeMounts []struct {
						Name      string `json:"name"`
						MountPath string `json:"mountPath"`
					} `json:"volumeMounts"`
				} `json:"containers"`
				Volumes []struct {
					Name      string `json:"name"`
					ConfigMap *struct {
						Name     string `json:"name"`
						Optional bool   `json:"optional"`
					} `json:"configMap"`
				} `json:"volumes"`
			} `json:"spec"`
		} `json:"template"`
	} `json:"spec"`
	Provisioner string            `json:"provisioner"`
	Driver      string            `json:"driver"`
	Parameters  map[string]string `json:"parameters"`
	Data        map[string]string `json:"data"`
}

// loadManifests parses every YAML file under deploy/ with Python's yaml
// module (the Go module has no YAML parser) and returns the objects.
func loadManifests(t *testing.T) []manifest {
	t.Helper()
	if err := exec.Command("python3", "-c", "import yaml").Run(); err != nil {
		t.Fatalf("python3 with the yaml module (Debian: python3-yaml) is needed to check the manifests: %v", err)
	}
	files, err := filepath.Glob("../../deploy/kubernetes/*.yaml")
	require.NoError(t, err)
	more, _ := filepath.Glob("../../deploy/kubernetes/example/*.yaml")
	files = append(files, more...)
	require.NotEmpty(t, files)
	var all []manifest
	for _, f := range files {
		out, err := exec.Command("python3", "-c",
			"import sys, json, yaml; json.dump(list(yaml.safe_load_all(open(sys.argv[1]))), sys.stdout)", f).CombinedOutput()
		require.NoError(t, err, "%s does not parse as YAML:\n%s", f, out)
		var docs []json.RawMessage
		require.NoError(t, json.Unmarshal(out, &docs), f)
		for i, d := range docs {
			if string(d) == "null" {
				continue
			}
			var m manifest
			require.NoError(t, json.Unmarshal(d, &m), "%s document %d", f, i)
			m.File = filepath.Base(f)
			require.NotEmpty(t, m.APIVersion, "%s document %d: no apiVersion", f, i)
			require.NotEmpty(t, m.Kind, "%s document %d: no kind", f, i)
			require.NotEmpty(t, m.Metadata["name"], "%s document %d: no metadata.name", f, i)
			all = append(all, m)
		}
	}
	return all
}

// TestManifests parses the manifests and checks what ties them to the
// code: the driver name, the purerbd-csi flags (run through the real flag
// parser), the StorageClass parameters and the cluster config.
func TestManifests(t *testing.T) {
	ms := loadManifests(t)
	kinds := map[string]int{}
	var sawController, sawNode bool
	for _, m := range ms {
		kinds[m.Kind]++
		switch m.Kind {
		case "CSIDriver":
			assert.Equal(t, csi.DefaultDriverName, m.Metadata["name"])
			require.NotNil(t, m.Spec.AttachRequired)
			assert.False(t, *m.Spec.AttachRequired, "no ControllerPublish: attachRequired must be false")
		case "Deployment", "DaemonSet":
			for _, c := range m.Spec.Template.Spec.Containers {
				require.NotEmpty(t, c.Image, "%s: container %s has no image", m.File, c.Name)
				if c.Name != "purerbd-csi" {
					assert.True(t, strings.HasPrefix(c.Image, "registry.k8s.io/sig-storage/"), c.Image)
					assert.Contains(t, c.Args, "--csi-address=/csi/csi.sock", "%s: %s", m.File, c.Name)
					continue
				}
				// Kubernetes expands $(NODE_NAME); the flag parser
				// must accept everything else as written.
				cfg, _, err := parseFlags(c.Args, &bytes.Buffer{})
				require.NoError(t, err, "%s: purerbd-csi args %q", m.File, c.Args)
				assert.Equal(t, csi.DefaultDriverName, cfg.DriverName)
				// ceph-csi's optional ceph-config ConfigMap, where
				// --ceph-conf looks by default
				mounted := ""
				for _, vm := range c.VolumeMounts {
					if vm.MountPath+"/ceph.conf" == defaultCephConf {
						mounted = vm.Name
					}
				}
				optional := false
				for _, v := range m.Spec.Template.Spec.Volumes {
					if v.Name == mounted && v.ConfigMap != nil && v.ConfigMap.Name == "ceph-config" {
						optional = v.ConfigMap.Optional
					}
				}
				assert.True(t, optional, "%s: the ceph-config ConfigMap is mounted at /etc/ceph, optional", m.File)
				sawController = sawController || cfg.Controller
				sawNode = sawNode || cfg.Node
			}
			names := []string{}
			for _, c := range m.Spec.Template.Spec.Containers {
				names = append(names, c.Name)
			}
			assert.NotContains(t, names, "csi-attacher")
		case "StorageClass":
			assert.Equal(t, csi.DefaultDriverName, m.Provisioner)
			assert.NotEmpty(t, m.Parameters["pool"])
		case "VolumeSnapshotClass":
			assert.Equal(t, csi.DefaultDriverName, m.Driver)
		case "ConfigMap":
			if m.Metadata["name"] == "ceph-config" {
				// the ceph.conf the plugins read their modes from
				conf := filepath.Join(t.TempDir(), "ceph.conf")
				require.NoError(t, os.WriteFile(conf, []byte(m.Data["ceph.conf"]), 0o644))
				opts, err := storeOptions(cephOptions{conf: conf, confGiven: true})
				require.NoError(t, err, "ceph.conf of %s", m.File)
				mon, osd := opts.Modes("")
				assert.Equal(t, [2]string{"secure", "secure"}, [2]string{mon, osd}, "the example encrypts every connection")
				continue
			}
			cs, err := csi.ParseClusters([]byte(m.Data["config.json"]))
			require.NoError(t, err, "config.json of %s", m.File)
			require.Len(t, cs, 1)
		}
	}
	assert.True(t, sawController && sawNode, "a controller and a node plugin")
	for _, k := range []string{"CSIDriver", "Deployment", "DaemonSet", "ServiceAccount", "ClusterRole",
		"ClusterRoleBinding", "Role", "RoleBinding", "StorageClass", "VolumeSnapshotClass", "ConfigMap", "Secret",
		"PersistentVolumeClaim", "Namespace"} {
		assert.NotZero(t, kinds[k], "no %s in deploy/", k)
	}
	t.Logf("%d objects parsed: %v", len(ms), kinds)

	// The README documents every StorageClass parameter the example uses.
	readme, err := os.ReadFile("../../deploy/README.md")
	require.NoError(t, err)
	for _, m := range ms {
		for k := range m.Parameters {
			if !strings.HasPrefix(k, "csi.storage.k8s.io/") || k == "csi.storage.k8s.io/fstype" {
				assert.Contains(t, string(readme), "`"+k+"`", "deploy/README.md does not document %s", k)
			}
		}
	}
}
