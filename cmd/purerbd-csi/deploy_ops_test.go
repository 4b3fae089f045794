package main

import (
	"encoding/json"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// checkResources checks that a container has CPU and memory requests
// and limits, and GOMEMLIMIT taken from its own memory limit (every
// container is a Go program).
func checkResources(t *testing.T, file string, c container) {
	t.Helper()
	for _, r := range []string{"cpu", "memory"} {
		assert.NotEmpty(t, c.Resources.Requests[r], "%s: container %s has no %s request", file, c.Name, r)
		assert.NotEmpty(t, c.Resources.Limits[r], "%s: container %s has no %s limit", file, c.Name, r)
	}
	found := false
	for _, e := range c.Env {
		if e.Name != "GOMEMLIMIT" {
			continue
		}
		found = true
		require.NotNil(t, e.ValueFrom, "%s: %s: GOMEMLIMIT is not taken from the limit", file, c.Name)
		require.NotNil(t, e.ValueFrom.ResourceFieldRef, "%s: %s: GOMEMLIMIT is not a resourceFieldRef", file, c.Name)
		assert.Equal(t, "limits.memory", e.ValueFrom.ResourceFieldRef.Resource, "%s: %s", file, c.Name)
		assert.Contains(t, []string{"", c.Name}, e.ValueFrom.ResourceFieldRef.ContainerName, "%s: %s: another container's limit", file, c.Name)
	}
	assert.True(t, found, "%s: container %s has no GOMEMLIMIT", file, c.Name)
}

// checkSidecarMetrics checks that a sidecar serves its metrics
// (--http-endpoint) on a port the container declares.
func checkSidecarMetrics(t *testing.T, file string, c container) {
	t.Helper()
	addr := ""
	for _, a := range c.Args {
		if v, ok := strings.CutPrefix(a, "--http-endpoint="); ok {
			addr = v
		}
	}
	require.NotEmpty(t, addr, "%s: sidecar %s serves no metrics (--http-endpoint)", file, c.Name)
	checkPort(t, file, c, "", addr)
}

// checkPort checks that the port of addr is declared by the container,
// under name when name is not empty.
func checkPort(t *testing.T, file string, c container, name, addr string) {
	t.Helper()
	require.NotEmpty(t, addr, "%s: %s: no address for its %s port", file, c.Name, name)
	_, port, err := net.SplitHostPort(addr)
	require.NoError(t, err, "%s: %s: address %q", file, c.Name, addr)
	for _, p := range c.Ports {
		if strconv.Itoa(p.ContainerPort) == port && (name == "" || p.Name == name) {
			return
		}
	}
	t.Errorf("%s: container %s listens on %s but declares no port %s named %q", file, c.Name, addr, port, name)
}

// labelSelector is a selector: a Service's (labels) or a matchLabels one.
func labelSelector(t *testing.T, m manifest) map[string]string {
	t.Helper()
	var sel struct {
		MatchLabels map[string]string `json:"matchLabels"`
	}
	require.NoError(t, json.Unmarshal(m.Spec.Selector, &sel), "%s: %s selector", m.File, m.Kind)
	if sel.MatchLabels != nil {
		return sel.MatchLabels
	}
	var plain map[string]string
	require.NoError(t, json.Unmarshal(m.Spec.Selector, &plain), "%s: %s selector", m.File, m.Kind)
	return plain
}

func matches(sel, labels map[string]string) bool {
	if len(sel) == 0 {
		return false
	}
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return true
}

func labelsOf(m manifest) map[string]string {
	out := map[string]string{}
	if l, ok := m.Metadata["labels"].(map[string]any); ok {
		for k, v := range l {
			out[k] = fmt.Sprint(v)
		}
	}
	return out
}

// checkOperations checks the objects an operator relies on around the
// plugins: the namespace admits privileged pods; each Service selects
// pods whose containers declare its target ports; the controller's
// disruption budget selects it without blocking drains; each
// ServiceMonitor selects Services with the ports it scrapes.
func checkOperations(t *testing.T, ms []manifest) {
	t.Helper()
	var workloads, services []manifest
	for _, m := range ms {
		switch m.Kind {
		case "Deployment", "DaemonSet":
			workloads = append(workloads, m)
		case "Service":
			services = append(services, m)
		case "Namespace":
			assert.Equal(t, "privileged", labelsOf(m)["pod-security.kubernetes.io/enforce"],
				"%s: the node plugin is privileged: the namespace must be labelled pod-security.kubernetes.io/enforce: privileged", m.File)
		}
	}
	for _, s := range services {
		sel := labelSelector(t, s)
		var pods []manifest
		for _, w := range workloads {
			if matches(sel, w.Spec.Template.Metadata.Labels) {
				pods = append(pods, w)
			}
		}
		require.Len(t, pods, 1, "%s: Service %v selects one workload", s.File, s.Metadata["name"])
		require.NotEmpty(t, s.Spec.Ports, s.File)
		for _, p := range s.Spec.Ports {
			target := fmt.Sprint(p.TargetPort)
			found := false
			for _, c := range pods[0].Spec.Template.Spec.Containers {
				for _, cp := range c.Ports {
					found = found || cp.Name == target || strconv.Itoa(cp.ContainerPort) == target
				}
			}
			assert.True(t, found, "%s: Service port %s targets %s, which no container of %v declares", s.File, p.Name, target, pods[0].Metadata["name"])
		}
	}
	pdbs := 0
	for _, m := range ms {
		switch m.Kind {
		case "PodDisruptionBudget":
			pdbs++
			sel := labelSelector(t, m)
			for _, w := range workloads {
				if !matches(sel, w.Spec.Template.Metadata.Labels) {
					continue
				}
				assert.Equal(t, "Deployment", w.Kind, "%s: the budget is the controller's", m.File)
				if w.Spec.Replicas == nil || *w.Spec.Replicas <= 1 {
					assert.Nil(t, m.Spec.MinAvailable, "%s: minAvailable with one replica blocks every drain", m.File)
					assert.NotNil(t, m.Spec.MaxUnavailable, m.File)
				}
			}
		case "ServiceMonitor":
			sel := labelSelector(t, m)
			ports := map[string]bool{}
			n := 0
			for _, s := range services {
				if matches(sel, labelsOf(s)) && s.Metadata["namespace"] == m.Metadata["namespace"] {
					n++
					for _, p := range s.Spec.Ports {
						ports[p.Name] = true
					}
				}
			}
			assert.Equal(t, 1, n, "%s: ServiceMonitor %v selects one Service", m.File, m.Metadata["name"])
			for _, e := range m.Spec.Endpoints {
				assert.True(t, ports[e.Port], "%s: ServiceMonitor %v scrapes port %s, which its Service lacks", m.File, m.Metadata["name"], e.Port)
			}
		}
	}
	assert.Equal(t, 1, pdbs, "one PodDisruptionBudget, the controller's")
}
