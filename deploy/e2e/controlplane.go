package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/purerbd/purerbd/rados/radostest/netns"
)

// Cluster addresses: the Service range holds the kubernetes Service at
// its first address; pods get addresses from PodCIDR on the node's
// bridge.
const (
	serviceCIDR   = "10.96.0.0/16"
	kubernetesSvc = "10.96.0.1"
	podCIDR       = "10.244.0.0/24"
	apiPort       = "6443"
)

// controlPlane is etcd, kube-apiserver, kube-controller-manager and
// kube-scheduler, each a process of the multi-call binary inside the
// test's network namespace, the API server on the namespace's host
// address.
type controlPlane struct {
	ns    *netns.Namespace
	kube  string
	dir   string
	pki   *pki
	admin string // the admin kubeconfig
	procs []*proc
}

// proc is a running component; done closes when it has exited.
type proc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
}

// pkiDir is where the certificates are, on the host and in the guest.
const pkiDirName = "pki"

// newControlPlane issues the certificates of every component, the
// kubelet's included (nodeName at guestIP), and writes the kubeconfigs.
func newControlPlane(ns *netns.Namespace, kube, dir, nodeName, guestIP string) (*controlPlane, error) {
	pdir := filepath.Join(dir, pkiDirName)
	if err := os.MkdirAll(pdir, 0o700); err != nil {
		return nil, err
	}
	p, err := newPKI(pdir)
	if err != nil {
		return nil, err
	}
	specs := []certSpec{
		{name: "apiserver", cn: "kube-apiserver", server: true,
			ips: []string{ns.HostIP, kubernetesSvc, "127.0.0.1"},
			dns: []string{"kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local", "localhost"}},
		{name: "apiserver-kubelet-client", cn: "kube-apiserver-kubelet-client", orgs: []string{"system:masters"}},
		{name: "admin", cn: "kubernetes-admin", orgs: []string{"system:masters"}},
		{name: "controller-manager", cn: "system:kube-controller-manager"},
		{name: "scheduler", cn: "system:kube-scheduler"},
		{name: "kubelet", cn: "system:node:" + nodeName, orgs: []string{"system:nodes"}},
		{name: "kubelet-serving", cn: nodeName, server: true, ips: []string{guestIP}, dns: []string{nodeName}},
	}
	for _, s := range specs {
		if err := p.issue(s); err != nil {
			return nil, err
		}
	}
	cp := &controlPlane{ns: ns, kube: kube, dir: dir, pki: p, admin: filepath.Join(dir, "admin.kubeconfig")}
	server := "https://" + ns.HostIP + ":" + apiPort
	for _, n := range []string{"admin", "controller-manager", "scheduler"} {
		if err := writeKubeconfig(filepath.Join(dir, n+".kubeconfig"), server, pdir, n); err != nil {
			return nil, err
		}
	}
	return cp, nil
}

// start runs the components and waits until the API server is ready.
func (cp *controlPlane) start(ctx context.Context) error {
	p := cp.pki.path
	etcdDir := filepath.Join(cp.dir, "etcd")
	comps := [][]string{
		{"etcd", "--name=e2e", "--data-dir=" + etcdDir,
			"--listen-client-urls=http://127.0.0.1:2379", "--advertise-client-urls=http://127.0.0.1:2379",
			"--listen-peer-urls=http://127.0.0.1:2380", "--initial-advertise-peer-urls=http://127.0.0.1:2380",
			"--initial-cluster=e2e=http://127.0.0.1:2380",
			// a throwaway cluster: losing it on a crash loses nothing
			"--unsafe-no-fsync", "--log-level=warn"},
		{"kube-apiserver",
			"--etcd-servers=http://127.0.0.1:2379",
			"--advertise-address=" + cp.ns.HostIP, "--bind-address=" + cp.ns.HostIP, "--secure-port=" + apiPort,
			"--service-cluster-ip-range=" + serviceCIDR,
			"--client-ca-file=" + p("ca.crt"),
			"--tls-cert-file=" + p("apiserver.crt"), "--tls-private-key-file=" + p("apiserver.key"),
			"--kubelet-client-certificate=" + p("apiserver-kubelet-client.crt"),
			"--kubelet-client-key=" + p("apiserver-kubelet-client.key"),
			"--kubelet-certificate-authority=" + p("ca.crt"),
			"--kubelet-preferred-address-types=InternalIP",
			"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
			"--service-account-key-file=" + p("sa.pub"),
			"--service-account-signing-key-file=" + p("sa.key"),
			"--authorization-mode=Node,RBAC",
			"--enable-admission-plugins=NodeRestriction",
			"--allow-privileged=true",
			"--profiling=false"},
		{"kube-controller-manager",
			"--kubeconfig=" + filepath.Join(cp.dir, "controller-manager.kubeconfig"),
			"--authentication-kubeconfig=" + filepath.Join(cp.dir, "controller-manager.kubeconfig"),
			"--authorization-kubeconfig=" + filepath.Join(cp.dir, "controller-manager.kubeconfig"),
			"--bind-address=127.0.0.1",
			"--service-account-private-key-file=" + p("sa.key"),
			"--root-ca-file=" + p("ca.crt"),
			"--cluster-signing-cert-file=" + p("ca.crt"), "--cluster-signing-key-file=" + p("ca.key"),
			"--use-service-account-credentials=true",
			"--service-cluster-ip-range=" + serviceCIDR,
			"--leader-elect=false", "--profiling=false"},
		{"kube-scheduler",
			"--kubeconfig=" + filepath.Join(cp.dir, "scheduler.kubeconfig"),
			"--authentication-kubeconfig=" + filepath.Join(cp.dir, "scheduler.kubeconfig"),
			"--authorization-kubeconfig=" + filepath.Join(cp.dir, "scheduler.kubeconfig"),
			"--bind-address=127.0.0.1",
			"--leader-elect=false", "--profiling=false"},
	}
	for i, c := range comps {
		logf, err := os.Create(filepath.Join(cp.dir, c[0]+".log"))
		if err != nil {
			return err
		}
		cmd := cp.ns.Command(ctx, cp.kube, c...)
		cmd.Stdout, cmd.Stderr = logf, logf
		cmd.WaitDelay = 5 * time.Second
		if err := cmd.Start(); err != nil {
			logf.Close()
			return fmt.Errorf("control plane: start %s: %w", c[0], err)
		}
		logf.Close()
		pr := &proc{name: c[0], cmd: cmd, done: make(chan struct{})}
		go func() { cmd.Wait(); close(pr.done) }()
		cp.procs = append(cp.procs, pr)
		switch i {
		case 0: // etcd before the API server
			if err := cp.waitFor(ctx, "etcd", 60*time.Second, "wget", "-q", "-O", "-", "http://127.0.0.1:2379/health"); err != nil {
				return err
			}
		case 1: // the API server before its clients
			if err := cp.waitFor(ctx, "kube-apiserver", 3*time.Minute, cp.kube, "kubectl", "--kubeconfig="+cp.admin, "get", "--raw=/readyz"); err != nil {
				return err
			}
		}
	}
	return nil
}

// waitFor runs probe inside the namespace until it succeeds.
func (cp *controlPlane) waitFor(ctx context.Context, what string, limit time.Duration, probe ...string) error {
	deadline := time.Now().Add(limit)
	var last []byte
	for time.Now().Before(deadline) {
		out, err := cp.ns.Command(ctx, probe[0], probe[1:]...).CombinedOutput()
		if err == nil {
			return nil
		}
		last = out
		for _, pr := range cp.procs {
			select {
			case <-pr.done:
				return fmt.Errorf("control plane: %s exited: %s", pr.name, cp.logTail(pr.name))
			default:
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
	return fmt.Errorf("control plane: %s not ready after %v: %s\n%s", what, limit, strings.TrimSpace(string(last)), cp.logTail(what))
}

// logTail returns the end of a component's log.
func (cp *controlPlane) logTail(name string) string {
	b, _ := os.ReadFile(filepath.Join(cp.dir, name+".log"))
	if len(b) > 3000 {
		b = b[len(b)-3000:]
	}
	return string(b)
}

// stop ends the components, the API server's clients first.
func (cp *controlPlane) stop() {
	for i := len(cp.procs) - 1; i >= 0; i-- {
		pr := cp.procs[i]
		pr.cmd.Process.Signal(os.Interrupt)
		select {
		case <-pr.done:
		case <-time.After(10 * time.Second):
			pr.cmd.Process.Kill()
			<-pr.done
		}
	}
}
