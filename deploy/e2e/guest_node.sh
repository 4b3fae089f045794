#!/bin/sh
# The Kubernetes node in the VM: containerd, the images, the kubelet.
# Runs as vmtest's command after init brought eth0 up; never returns on
# success (the test stops the VM).
set -u
say() { echo "e2e-node: $*"; }
fail() { say "FAILED: $*"; exit 1; }

# the root is a tmpfs (vmtest's TmpfsRoot): make mounts propagate as a
# node's root does
mount --make-rshared / || fail "make-rshared /"
mkdir -p /sys/fs/cgroup && mount -t cgroup2 cgroup2 /sys/fs/cgroup || fail "cgroup2"
for ctl in cpu cpuset memory pids io hugetlb; do
	echo "+$ctl" > /sys/fs/cgroup/cgroup.subtree_control 2>/dev/null || say "cgroup controller $ctl not enabled"
done
for d in /var/lib/containerd /var/lib/kubelet /var/log /run/purerbd-csi; do
	mkdir -p $d
done
mount -t tmpfs -o size=3g tmpfs /var/lib/containerd || fail "tmpfs containerd"
mount -t tmpfs tmpfs /var/lib/kubelet || fail "tmpfs kubelet"
mount --make-rshared /var/lib/kubelet
mkdir -p /var/lib/kubelet/plugins /var/lib/kubelet/plugins_registry /var/lib/kubelet/pods
for m in $(cat /etc/e2e/modules); do modprobe "$m" || say "modprobe $m failed"; done
sysctl -w net.ipv4.ip_forward=1 >/dev/null
hostname "$(cat /etc/hostname)"

# the kubernetes Service: this cluster has no kube-proxy; one DNAT rule
# stands in for the service proxy every cluster runs
API=$(cat /etc/e2e/apiserver)
nft -f - <<NFT || fail "nft"
table ip e2e-svc {
	chain pre { type nat hook prerouting priority -100; ip daddr 10.96.0.1 tcp dport 443 dnat to $API; }
	chain out { type nat hook output priority -100; ip daddr 10.96.0.1 tcp dport 443 dnat to $API; }
}
NFT
# the node's own processes (hostNetwork pods: the node plugin) look up a
# route before the output hook rewrites the address; a node with a
# default route has one, this one (whose traffic stays in the test's
# namespace) gets one for the Service's address alone
ip route add 10.96.0.1/32 via "${API%:*}" dev eth0 || fail "route to the kubernetes Service"

containerd --config /etc/containerd/config.toml >/var/log/containerd.log 2>&1 &
i=0; until ctr version >/dev/null 2>&1; do i=$((i+1)); [ $i -gt 120 ] && fail "containerd did not start: $(tail -20 /var/log/containerd.log)"; sleep 1; done
say "containerd up uptime=$(cut -d' ' -f1 /proc/uptime)"
for t in /images/*.tar; do
	[ -e "$t" ] || continue
	ctr -n k8s.io images import --all-platforms "$t" >/dev/null || fail "import $t"
done
say "images imported uptime=$(cut -d' ' -f1 /proc/uptime)"
ctr -n k8s.io images ls -q | sed 's/^/e2e-node: image /'

/usr/local/bin/kube kubelet --config=/etc/kubernetes/kubelet.yaml \
	--kubeconfig=/etc/kubernetes/kubelet.kubeconfig \
	--hostname-override="$(cat /etc/hostname)" --node-ip="$(cat /etc/e2e/node-ip)" \
	--v=2 >/var/log/kubelet.log 2>&1 &
KUBELET=$!
say "kubelet started uptime=$(cut -d' ' -f1 /proc/uptime)"
# the kubelet runs until the VM is stopped; a kubelet that dies is
# reported with its log, and the node goes away
wait $KUBELET
say "kubelet exited with $?"
tail -50 /var/log/kubelet.log
exit 1
