package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/purerbd/purerbd/nbd/kernel/vmtest"
	"github.com/purerbd/purerbd/rados/radostest/cephcluster"
	"github.com/purerbd/purerbd/rados/radostest/netns"
)

// Cluster is a running Kubernetes cluster of one node beside a Ceph
// cluster, both inside one network namespace of the test.
type Cluster struct {
	Ceph     *cephcluster.Cluster
	NS       *netns.Namespace
	Node     string // the node's name
	NodeIP   string
	RepoRoot string
	Dir      string // logs, certificates, kubeconfigs
	// Pool is the Ceph pool the example StorageClass names; CephUser
	// and CephKey the user of the example Secret, made with the caps
	// the example asks for.
	Pool     string
	CephUser string
	CephKey  string
	// ClusterID is the example ConfigMap's cluster ID.
	ClusterID string
	// Addons are those Deploy installed.
	Addons Addons

	cp      *controlPlane
	vmDone  chan struct{}
	vmErr   error
	console *syncFile
}

// Setup is what Start needs from outside: the images to import
// (docker-archive tars whose references are the manifests' images).
type Setup struct {
	RepoRoot string
	Images   []string
	Log      io.Writer
}

// Start boots Ceph, the control plane and the node, and returns when the
// node is Ready. Everything is stopped by tb's cleanup.
func Start(ctx context.Context, tb testing.TB, s Setup) (*Cluster, error) {
	tb.Helper()
	host := vmtest.FindHost(tb)
	kube, err := KubeBinary(ctx, s.RepoRoot, s.Log)
	if err != nil {
		return nil, err
	}
	dir := tb.TempDir()
	ns := netns.New(tb, netns.Options{})
	c := &Cluster{NS: ns, Node: "e2e-node", NodeIP: ns.GuestIP(0), RepoRoot: s.RepoRoot, Dir: dir,
		Pool: "kubernetes", CephUser: "kubernetes", vmDone: make(chan struct{})}

	t0 := time.Now()
	ceph, err := cephcluster.Start(ctx, cephcluster.Options{Netns: ns.Name, BindAddr: ns.HostIP, Pool: c.Pool})
	if err != nil {
		return nil, err
	}
	tb.Cleanup(func() { ceph.Close() })
	c.Ceph = ceph
	// the user the example Secret describes, with exactly its caps
	if _, err := ceph.Ceph(ctx, "auth", "get-or-create", "client."+c.CephUser,
		"mon", "profile rbd", "osd", "profile rbd pool="+c.Pool, "mgr", "profile rbd pool="+c.Pool); err != nil {
		return nil, err
	}
	key, err := ceph.Ceph(ctx, "auth", "get-key", "client."+c.CephUser)
	if err != nil {
		return nil, err
	}
	c.CephKey = strings.TrimSpace(string(key))
	fmt.Fprintf(s.Log, "e2e: ceph up in %v\n", time.Since(t0).Round(time.Millisecond))

	// pods reach Ceph and the API server through the node, routed
	if out, err := ns.Command(ctx, "ip", "route", "add", podCIDR, "via", c.NodeIP).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("route to pods: %v: %s", err, out)
	}
	cp, err := newControlPlane(ns, kube, dir, c.Node, c.NodeIP)
	if err != nil {
		return nil, err
	}
	c.cp = cp
	// stopped after the VM (cleanups run last-registered first)
	tb.Cleanup(cp.stop)
	t1 := time.Now()
	if err := cp.start(ctx); err != nil {
		return nil, err
	}
	fmt.Fprintf(s.Log, "e2e: control plane up in %v\n", time.Since(t1).Round(time.Millisecond))

	cfg, err := guestConfig(ns, cp, node{name: c.Node, ip: c.NodeIP}, s.Images, dir)
	if err != nil {
		return nil, err
	}
	console, err := newSyncFile(filepath.Join(dir, "console.log"))
	if err != nil {
		return nil, err
	}
	c.console = console
	cfg.Output = console
	// a node whose kernel locks up under TCG before it is Ready is
	// booted again (vmtest.Config.Ready); once Ready, a lockup fails
	ready := make(chan struct{})
	cfg.Ready = ready
	vmCtx, stopVM := context.WithCancel(context.WithoutCancel(ctx))
	tb.Cleanup(func() {
		stopVM()
		<-c.vmDone
		console.Close()
	})
	t2 := time.Now()
	go func() {
		defer close(c.vmDone)
		_, c.vmErr = vmtest.Run(vmCtx, tb, host, cfg)
	}()
	if err := c.waitNodeReady(ctx, nodeReadyLimit); err != nil {
		return nil, err
	}
	close(ready)
	fmt.Fprintf(s.Log, "e2e: node %s Ready %v after boot\n", c.Node, time.Since(t2).Round(time.Millisecond))
	return c, nil
}

// nodeReadyLimit bounds the node's way to Ready, from its first boot: a
// few minutes each for up to three boots (the first two stopped by a
// lockup).
const nodeReadyLimit = 25 * time.Minute

// LockedUpBoots counts the node's boots stopped because its kernel
// locked up, from what vmtest wrote on the console.
func (c *Cluster) LockedUpBoots() int {
	b, _ := os.ReadFile(filepath.Join(c.Dir, "console.log"))
	return strings.Count(string(b), vmtest.LockupMark)
}

// waitNodeReady waits for the node's Ready condition, failing early when
// the VM stops.
func (c *Cluster) waitNodeReady(ctx context.Context, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		select {
		case <-c.vmDone:
			return fmt.Errorf("the node's VM stopped (%v) before the node was Ready:\n%s", c.vmErr, c.ConsoleTail(80))
		default:
		}
		out, err := c.Kubectl(ctx, "get", "node", c.Node, "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`)
		if err == nil && strings.TrimSpace(string(out)) == "True" {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(3 * time.Second):
		}
	}
	return fmt.Errorf("node %s not Ready after %v:\n%s", c.Node, limit, c.ConsoleTail(80))
}

// Kubectl runs kubectl as the cluster's admin inside the namespace and
// returns its standard output; an error carries its standard error.
func (c *Cluster) Kubectl(ctx context.Context, args ...string) ([]byte, error) {
	return c.KubectlInput(ctx, nil, args...)
}

// KubectlInput is Kubectl with stdin.
func (c *Cluster) KubectlInput(ctx context.Context, stdin []byte, args ...string) ([]byte, error) {
	cmd := c.NS.Command(ctx, c.cp.kube, append([]string{"kubectl", "--kubeconfig=" + c.cp.admin}, args...)...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return out.Bytes(), fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(errb.String()))
	}
	return out.Bytes(), nil
}

// ConsoleTail is the end of the VM's console.
func (c *Cluster) ConsoleTail(lines int) string {
	b, _ := os.ReadFile(filepath.Join(c.Dir, "console.log"))
	l := strings.Split(string(b), "\n")
	if len(l) > lines {
		l = l[len(l)-lines:]
	}
	return strings.Join(l, "\n")
}

// NodeLog fetches a file of the node's /var/log through the API server
// (the kubelet's log handler).
func (c *Cluster) NodeLog(ctx context.Context, name string) ([]byte, error) {
	return c.Kubectl(ctx, "get", "--raw", "/api/v1/nodes/"+c.Node+"/proxy/logs/"+name)
}

// ControlPlaneLog is the end of a control plane component's log.
func (c *Cluster) ControlPlaneLog(name string) string { return c.cp.logTail(name) }

// syncFile is a file written from several goroutines.
type syncFile struct {
	mu sync.Mutex
	f  *os.File
}

func newSyncFile(path string) (*syncFile, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	return &syncFile{f: f}, nil
}

func (s *syncFile) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.f.Write(p)
}

func (s *syncFile) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.f.Close()
}

// Helm runs the helm binary bin against the cluster, as Kubectl runs
// kubectl: in the test's network namespace, with the admin kubeconfig.
func (c *Cluster) Helm(ctx context.Context, bin string, args ...string) ([]byte, error) {
	cmd := c.NS.Command(ctx, bin, append([]string{"--kubeconfig=" + c.cp.admin}, args...)...)
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+filepath.Join(c.Dir, "helm", "cache"),
		"HELM_CONFIG_HOME="+filepath.Join(c.Dir, "helm", "config"), "HELM_DATA_HOME="+filepath.Join(c.Dir, "helm", "data"))
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return out.Bytes(), fmt.Errorf("helm %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(errb.String()))
	}
	return out.Bytes(), nil
}
