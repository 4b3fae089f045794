package e2e

import (
	_ "embed"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/purerbd/purerbd/deploy/e2e/images"
	"github.com/purerbd/purerbd/nbd/kernel/vmtest"
	"github.com/purerbd/purerbd/rados/radostest/netns"
)

// guestNodeScript is the node's command in the VM.
//
//go:embed guest_node.sh
var guestNodeScript string

// guestModules are the kernel modules the node loads: the NBD driver,
// loop (the kubelet pins a raw block volume's device with a loop
// device), the file systems the tests format, overlayfs for containerd, the
// bridge and veth pairs of the CNI bridge plugin, nftables NAT for the
// kubernetes Service.
var guestModules = []string{"crc32c_generic", "nbd", "loop", "ext4", "xfs", "overlay", "bridge", "veth",
	"nf_tables", "nft_chain_nat", "nft_nat", "nf_nat", "nf_conntrack"}

// guestPrograms are the host's programs the node runs, with the Debian
// packages that provide them: the container runtime and CNI plugins,
// nft, and the file system tools purerbd-csi runs chroot'ed into the
// node's root (/host in its pod).
var guestPrograms = map[string]string{
	"/usr/bin/containerd":              "containerd",
	"/usr/bin/containerd-shim-runc-v2": "containerd",
	"/usr/bin/ctr":                     "containerd",
	"/usr/sbin/runc":                   "runc",
	"/usr/lib/cni/bridge":              "containernetworking-plugins",
	"/usr/lib/cni/host-local":          "containernetworking-plugins",
	"/usr/lib/cni/loopback":            "containernetworking-plugins",
	"/usr/sbin/nft":                    "nftables",
	"/sbin/losetup":                    "mount",
	"/sbin/mkfs.ext4":                  "e2fsprogs",
	"/sbin/e2fsck":                     "e2fsprogs",
	"/sbin/resize2fs":                  "e2fsprogs",
	"/sbin/mkfs.xfs":                   "xfsprogs",
	"/sbin/xfs_growfs":                 "xfsprogs",
	"/sbin/xfs_repair":                 "xfsprogs",
}

// node describes the VM that is the cluster's one node.
type node struct {
	name string
	ip   string
}

// guestConfig assembles the VM: the kubelet (the multi-call binary),
// containerd and the images, the node's certificates and configuration.
func guestConfig(ns *netns.Namespace, cp *controlPlane, n node, images []string, dir string) (vmtest.Config, error) {
	for p, pkg := range guestPrograms {
		if _, err := os.Stat(p); err != nil {
			return vmtest.Config{}, fmt.Errorf("%s not found: install the Debian package %s (make deps)", p, pkg)
		}
	}
	gdir := filepath.Join(dir, "guest")
	if err := os.MkdirAll(gdir, 0o700); err != nil {
		return vmtest.Config{}, err
	}
	files := map[string]string{"/usr/local/bin/kube": cp.kube}
	write := func(guest, content string, mode os.FileMode) error {
		p := filepath.Join(gdir, strings.ReplaceAll(strings.TrimPrefix(guest, "/"), "/", "_"))
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			return err
		}
		files[guest] = p
		return nil
	}
	const gpki = "/etc/kubernetes/pki"
	for _, f := range []string{"ca.crt", "kubelet.crt", "kubelet.key", "kubelet-serving.crt", "kubelet-serving.key"} {
		files[gpki+"/"+f] = cp.pki.path(f)
	}
	kcfg := filepath.Join(gdir, "kubelet.kubeconfig")
	if err := writeKubeconfig(kcfg, "https://"+ns.HostIP+":"+apiPort, gpki, "kubelet"); err != nil {
		return vmtest.Config{}, err
	}
	files["/etc/kubernetes/kubelet.kubeconfig"] = kcfg
	for i, img := range images {
		files[fmt.Sprintf("/images/%02d-%s", i, filepath.Base(img))] = img
	}
	for _, w := range []struct {
		guest, content string
		mode           os.FileMode
	}{
		{"/sbin/e2e-node", guestNodeScript, 0o755},
		{"/etc/kubernetes/kubelet.yaml", kubeletConfig(gpki), 0o644},
		{"/etc/containerd/config.toml", containerdConfig, 0o644},
		{"/etc/cni/net.d/10-e2e.conflist", cniConfig, 0o644},
		{"/etc/hostname", n.name + "\n", 0o644},
		{"/etc/hosts", "127.0.0.1 localhost\n" + n.ip + " " + n.name + "\n", 0o644},
		{"/etc/resolv.conf", "", 0o644},
		{"/etc/passwd", "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n", 0o644},
		{"/etc/group", "root:x:0:\nnogroup:x:65534:\n", 0o644},
		{"/etc/machine-id", "5e2e0000000000000000000000000001\n", 0o644},
		{"/etc/os-release", "PRETTY_NAME=\"purerbd e2e node (Debian 12 kernel)\"\nID=debian\n", 0o644},
		{"/etc/e2e/modules", strings.Join(guestModules, "\n") + "\n", 0o644},
		{"/etc/e2e/apiserver", ns.HostIP + ":" + apiPort, 0o644},
		{"/etc/e2e/node-ip", n.ip, 0o644},
	} {
		if err := write(w.guest, w.content, w.mode); err != nil {
			return vmtest.Config{}, err
		}
	}
	if _, err := os.Stat("/etc/mke2fs.conf"); err == nil {
		files["/etc/mke2fs.conf"] = "/etc/mke2fs.conf"
	}
	var progs []string
	for p := range guestPrograms {
		progs = append(progs, p)
	}
	return vmtest.Config{
		Modules:  guestModules,
		Programs: progs,
		Files:    files,
		Command:  []string{"/sbin/e2e-node"},
		// runc pivots into each container's root, which needs a real
		// mount as the node's root; and mounts of a Bidirectional
		// volume propagate back to it
		TmpfsRoot: true,
		Memory:    6144,
		CPUs:      2,
		Timeout:   2 * time.Hour,
		Network: &vmtest.Network{
			Netns: ns.Name, Tap: ns.Taps[0], GuestCIDR: n.ip + "/24", HostIP: ns.HostIP,
		},
	}, nil
}

// kubeletConfig is the kubelet's configuration file: certificates in
// dir, containerd's socket, cgroupfs, and eviction thresholds that fit a
// node whose disk is memory.
func kubeletConfig(dir string) string {
	return `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
authentication:
  x509: {clientCAFile: ` + dir + `/ca.crt}
  webhook: {enabled: true}
  anonymous: {enabled: false}
authorization: {mode: Webhook}
tlsCertFile: ` + dir + `/kubelet-serving.crt
tlsPrivateKeyFile: ` + dir + `/kubelet-serving.key
containerRuntimeEndpoint: unix:///run/containerd/containerd.sock
cgroupDriver: cgroupfs
failSwapOn: false
resolvConf: /etc/resolv.conf
clusterDomain: cluster.local
evictionHard: {memory.available: "100Mi", nodefs.available: "1%", imagefs.available: "1%", nodefs.inodesFree: "1%"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
serializeImagePulls: false
maxPods: 30
localStorageCapacityIsolation: false
`
}

// containerdConfig runs Debian's runc and CNI plugins with cgroupfs;
// the sandbox image is the locally built pause.
const containerdConfig = `version = 2
root = "/var/lib/containerd"
state = "/run/containerd"
[grpc]
  address = "/run/containerd/containerd.sock"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "` + images.PauseRef + `"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        BinaryName = "/usr/sbin/runc"
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "/etc/cni/net.d"
`

// cniConfig is a bridge network for pods: routed, not masqueraded (the
// test's namespace routes the pod range back to the node), so no
// iptables is needed.
const cniConfig = `{
  "cniVersion": "1.0.0",
  "name": "e2e",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "cni0",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [[{"subnet": "` + podCIDR + `"}]],
        "routes": [{"dst": "0.0.0.0/0"}]
      }
    },
    {"type": "loopback"}
  ]
}
`
