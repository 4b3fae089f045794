package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purerbd/purerbd/csi"
	"github.com/purerbd/purerbd/csi/kubelet"
	"github.com/purerbd/purerbd/internal/shorttier"
)

// manifest is the part of a Kubernetes object the checks look at.
type manifest struct {
	File       string         `json:"-"`
	APIVersion string         `json:"apiVersion"`
	Kind       string         `json:"kind"`
	Metadata   map[string]any `json:"metadata"`
	Spec       struct {
		AttachRequired *bool `json:"attachRequired"`
		Replicas       *int  `json:"replicas"`
		Template       struct {
			Metadata struct {
				Labels map[string]string `json:"labels"`
			} `json:"metadata"`
			Spec podSpec `json:"spec"`
		} `json:"template"`
		// Service, PodDisruptionBudget and ServiceMonitor
		Selector       json.RawMessage `json:"selector"`
		Ports          []servicePort   `json:"ports"`
		MaxUnavailable any             `json:"maxUnavailable"`
		MinAvailable   any             `json:"minAvailable"`
		Endpoints      []struct {
			Port string `json:"port"`
		} `json:"endpoints"`
	} `json:"spec"`
	Provisioner string            `json:"provisioner"`
	Driver      string            `json:"driver"`
	Parameters  map[string]string `json:"parameters"`
	Data        map[string]string `json:"data"`
}

// podSpec is the part of a pod template the checks look at.
type podSpec struct {
	HostNetwork bool        `json:"hostNetwork"`
	DNSPolicy   string      `json:"dnsPolicy"`
	Containers  []container `json:"containers"`
	Volumes     []struct {
		Name     string `json:"name"`
		HostPath *struct {
			Path string `json:"path"`
		} `json:"hostPath"`
		ConfigMap *struct {
			Name     string `json:"name"`
			Optional bool   `json:"optional"`
		} `json:"configMap"`
	} `json:"volumes"`
}

type servicePort struct {
	Name       string `json:"name"`
	Port       int    `json:"port"`
	TargetPort any    `json:"targetPort"`
}

type container struct {
	Name  string   `json:"name"`
	Image string   `json:"image"`
	Args  []string `json:"args"`
	Env   []struct {
		Name      string `json:"name"`
		ValueFrom *struct {
			ResourceFieldRef *struct {
				ContainerName string `json:"containerName"`
				Resource      string `json:"resource"`
			} `json:"resourceFieldRef"`
		} `json:"valueFrom"`
	} `json:"env"`
	Resources struct {
		Requests map[string]any `json:"requests"`
		Limits   map[string]any `json:"limits"`
	} `json:"resources"`
	Ports []struct {
		Name          string `json:"name"`
		ContainerPort int    `json:"containerPort"`
	} `json:"ports"`
	LivenessProbe *struct {
		HTTPGet *struct {
			Path string `json:"path"`
			Port any    `json:"port"` // a number or a port name
		} `json:"httpGet"`
	} `json:"livenessProbe"`
	VolumeMounts []struct {
		Name      string `json:"name"`
		MountPath string `json:"mountPath"`
	} `json:"volumeMounts"`
}

// loadManifests parses every YAML file under deploy/ with Python's yaml
// module (the Go module has no YAML parser) and returns the objects.
func loadManifests(t *testing.T) []manifest {
	t.Helper()
	shorttier.Skip(t, "python3 with yaml")
	if err := exec.Command("python3", "-c", "import yaml").Run(); err != nil {
		t.Fatalf("python3 with the yaml module (Debian: python3-yaml) is needed to check the manifests: %v", err)
	}
	files, err := filepath.Glob("../../deploy/kubernetes/*.yaml")
	require.NoError(t, err)
	// the kustomization lists the manifests; it is not one
	files = slices.DeleteFunc(files, func(f string) bool { return filepath.Base(f) == "kustomization.yaml" })
	for _, sub := range []string{"example", "monitoring"} {
		more, _ := filepath.Glob("../../deploy/kubernetes/" + sub + "/*.yaml")
		files = append(files, more...)
	}
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
				checkResources(t, m.File, c)
				if c.Name != "purerbd-csi" {
					// Only the controller's three sidecars: the node
					// plugin registers itself and both serve their own
					// health endpoint.
					assert.Equal(t, "Deployment", m.Kind, "%s: sidecar %s", m.File, c.Name)
					assert.Regexp(t, `^registry\.k8s\.io/sig-storage/csi-(provisioner|snapshotter|resizer):v`, c.Image, "%s: %s", m.File, c.Name)
					assert.Contains(t, c.Args, "--csi-address=/csi/csi.sock", "%s: %s", m.File, c.Name)
					checkSidecarMetrics(t, m.File, c)
					continue
				}
				assert.True(t, strings.HasPrefix(c.Image, "purerbd/purerbd-csi:"), c.Image)
				// Kubernetes expands $(NODE_NAME); the flag parser
				// must accept everything else as written.
				cfg, o, err := parseFlags(c.Args, &bytes.Buffer{})
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
				checkLiveness(t, m.File, c, o.kubelet.healthAddr)
				checkPort(t, m.File, c, "metrics", o.kubelet.metricsAddr)
				if m.Kind == "DaemonSet" {
					checkNodePod(t, m.File, m.Spec.Template.Spec, c, cfg, o.kubelet)
				}
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
			if m.Metadata["name"] == "ceph-csi-encryption-kms-config" {
				// ceph-csi's KMS sections, as the plugins read them
				ids, err := csi.CheckKMSConfig([]byte(m.Data["config.json"]))
				require.NoError(t, err, "config.json of %s", m.File)
				assert.NotEmpty(t, ids, "%s: no KMS section purerbd can use", m.File)
				continue
			}
			cs, err := csi.ParseClusters([]byte(m.Data["config.json"]))
			require.NoError(t, err, "config.json of %s", m.File)
			require.Len(t, cs, 1)
		}
	}
	assert.True(t, sawController && sawNode, "a controller and a node plugin")
	checkOperations(t, ms)
	for _, k := range []string{"CSIDriver", "Deployment", "DaemonSet", "ServiceAccount", "ClusterRole",
		"ClusterRoleBinding", "Role", "RoleBinding", "StorageClass", "VolumeSnapshotClass", "ConfigMap", "Secret",
		"PersistentVolumeClaim", "Namespace", "Service", "PodDisruptionBudget", "ServiceMonitor"} {
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

// checkLiveness checks that the container's liveness probe asks the
// plugin's own health endpoint, on the port --health-addr serves.
func checkLiveness(t *testing.T, file string, c container, healthAddr string) {
	t.Helper()
	require.NotEmpty(t, healthAddr, "%s: purerbd-csi serves no health endpoint (--health-addr)", file)
	_, port, err := net.SplitHostPort(healthAddr)
	require.NoError(t, err, "%s: --health-addr %q", file, healthAddr)
	require.NotNil(t, c.LivenessProbe, "%s: no livenessProbe", file)
	require.NotNil(t, c.LivenessProbe.HTTPGet, "%s: the livenessProbe is not an httpGet", file)
	assert.Equal(t, kubelet.HealthPath, c.LivenessProbe.HTTPGet.Path, file)
	probed := fmt.Sprint(c.LivenessProbe.HTTPGet.Port)
	for _, p := range c.Ports {
		if p.Name == probed {
			probed = strconv.Itoa(p.ContainerPort)
		}
	}
	assert.Equal(t, port, probed, "%s: the livenessProbe asks port %v, --health-addr is %s", file, c.LivenessProbe.HTTPGet.Port, healthAddr)
}

// checkNodePod checks what the node plugin needs of its pod: the host's
// network namespace (the nbd netlink family before Linux 6.4, LINK_DEAD
// always), and a registration with the kubelet that points at the CSI
// socket where the kubelet finds it on the host.
func checkNodePod(t *testing.T, file string, pod podSpec, c container, cfg csi.Config, k kubeletOptions) {
	t.Helper()
	assert.True(t, pod.HostNetwork, "%s: the node plugin must run with hostNetwork: true", file)
	assert.Equal(t, "ClusterFirstWithHostNet", pod.DNSPolicy, file)
	hostPathOf := func(mountPath string) string {
		for _, m := range c.VolumeMounts {
			if m.MountPath != mountPath {
				continue
			}
			for _, v := range pod.Volumes {
				if v.Name == m.Name && v.HostPath != nil {
					return v.HostPath.Path
				}
			}
		}
		return ""
	}
	require.NotEmpty(t, k.registrationPath, "%s: the node plugin does not register with the kubelet (--kubelet-registration-path)", file)
	assert.Equal(t, "/var/lib/kubelet/plugins/"+cfg.DriverName+"/csi.sock", k.registrationPath, file)
	sock, err := csi.EndpointPath(cfg.Endpoint)
	require.NoError(t, err)
	assert.Equal(t, filepath.Dir(k.registrationPath), hostPathOf(filepath.Dir(sock)),
		"%s: the CSI socket's directory %s is not the host's %s", file, filepath.Dir(sock), filepath.Dir(k.registrationPath))
	assert.Equal(t, "/var/lib/kubelet/plugins_registry", hostPathOf(k.registrationDir),
		"%s: the registration directory %s is not the kubelet's", file, k.registrationDir)
}
