// Package e2e runs the shipped Kubernetes manifests of deploy/kubernetes
// under a real Kubernetes: etcd, kube-apiserver, kube-controller-manager
// and kube-scheduler inside a network namespace of the test, beside a Ceph
// cluster bound to the same namespace, and a kubelet with containerd,
// runc and the CNI bridge plugin inside a qemu VM booted on a tap of that
// namespace (the VM has nbd.ko; the host may not). The Kubernetes
// components are built from the Kubernetes sources at the release
// deploy/e2e/kube pins, the sidecars from their Go modules
// (deploy/e2e/images); every image is built here and imported into the
// VM's containerd: nothing is pulled.
//
// The scenarios in e2e_test.go drive the cluster with kubectl as a user
// would and check the results with Ceph's own tools. `make e2e-k8s` runs
// them and prints one line per scenario.
package e2e
