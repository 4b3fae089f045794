# purerbd: every build is static (CGO_ENABLED=0). `make help` lists targets.
GO        ?= go
export CGO_ENABLED := 0
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo devel)
LDFLAGS   := -s -w -X github.com/purerbd/purerbd/internal/buildinfo.version=$(VERSION)
FUZZTIME  ?= 30s
# the fuzz smoke run inside `make test`
TESTFUZZTIME ?= 3s
# the linter, run by version so it is never linked into the module's binaries
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2

# Debian packages the tests need (installed by `make deps`, skipping those present)
DEB_PACKAGES := ceph-mon ceph-osd ceph-mgr ceph-common libgoogle-perftools4 python3-rados \
	libnbd-bin nbdkit qemu-utils qemu-block-extra fio python3-libnbd rbd-nbd \
	gcc libc6-dev linux-image-amd64 qemu-system-x86 busybox-static e2fsprogs xfsprogs cpio xz-utils \
	containerd runc containernetworking-plugins nftables cryptsetup-bin

# the release the manifests and the Helm chart pin (the image's tag)
RELEASE   := $(shell sed -n 's/^appVersion: *"*\([^"]*\)"*$$/\1/p' deploy/helm/purerbd-csi/Chart.yaml)

.PHONY: image help build test unit test-short race fuzz fuzz-smoke lint bench demo deps clean chaos e2e e2e-k8s matrix vm-kernels

help:
	@echo "make demo   boot a throwaway Ceph cluster on 127.0.0.1, write an RBD image, export it over NBD, walk through CSI (Ctrl-C stops it)"
	@echo "make test   everything CI runs: lint, all tests against real Ceph, the race detector, fuzz smoke"
	@echo "make test-short  the unit tier (go test -short): only the Go toolchain, no Ceph, in seconds"
	@echo "make build  static binaries into bin/"
	@echo "make image  the FROM scratch image purerbd/purerbd-csi:$(RELEASE) (purerbd-csi and the purerbd CLI)"
	@echo "make deps   install the Debian packages the tests need"
	@echo "make matrix  the interop smoke against Ceph Reef and Tentacle (from Debian roots built once)"
	@echo "make vm-kernels  the kernel smoke test and the ublk tests in a VM on Debian trixie's and sid's kernels [VM_KERNELS=...]"
	@echo "make lint | race | fuzz [FUZZTIME=30s] | bench | clean"

build:
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/ ./cmd/...

# the FROM scratch image with purerbd-csi and the purerbd CLI, tagged as
# deploy/kubernetes and the Helm chart name it
image: build
	docker build -f deploy/Dockerfile -t purerbd/purerbd-csi:$(RELEASE) bin/

# the developer tools (internal/cmd/purerbd-dev) link test machinery, so
# they are neither in ./cmd/... nor in bin/ from `make build`
# demo and test install the Debian packages they need first (deps: a
# no-op when they are present)
demo: deps
	$(GO) run -trimpath ./internal/cmd/purerbd-dev demo

deps:
	@missing=""; for p in $(DEB_PACKAGES); do \
		dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
		echo "installing:$$missing"; \
		SUDO=; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
		$$SUDO apt-get update -q && \
		DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -q --no-install-recommends $$missing; \
	else echo "deps: all present"; fi

# gofmt, import grouping (std, third-party, this module), go vet, a tidy
# go.mod, staticcheck (its default checks)
lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) run ./internal/tools/importcheck
	$(GO) vet ./...
	$(GO) mod tidy -diff
	$(GO) run $(STATICCHECK) ./...

# unit and integration tests: every package that needs Ceph boots its own
# cluster through rados/radostest (the Kubernetes run and the image
# builds it shares a cache with are e2e-k8s)
unit:
	$(GO) test -count=1 -timeout 45m -skip '^($(subst $(eval) ,|,$(VM_KERNEL_ONLY)))$$' $$($(GO) list ./... | grep -v -e '/deploy/e2e$$' -e '/deploy/e2e/images$$')

# the daemon-free tier: tests that need Ceph, VMs, root or any program
# but go skip themselves under -short (internal/shorttier)
test-short:
	$(GO) test -short -count=1 ./...

# the race detector: every package's -short tier, and the full tests
# (against a real cluster and real NBD clients) of the concurrent
# packages, whose concurrency only those peers exercise: the messenger,
# objecter, monitor client, rados, rbd, watch/notify, the NBD server and
# the CSI store. -race needs cgo (its runtime links against libc): these
# test binaries are the only cgo builds, never shipped.
RACE_FULL := ./rados/msgr ./rados/osdc ./rados/monc ./rados ./rbd ./rbd/watchnotify ./nbd ./csi/rbdstore
race:
	CGO_ENABLED=1 $(GO) test -race -short -count=1 -timeout 20m ./...
	CGO_ENABLED=1 $(GO) test -race -count=1 -timeout 30m $(RACE_FULL)

test: deps lint unit race fuzz-smoke matrix vm-kernels e2e-k8s

# the Ceph release matrix: `unit` runs every test against the host's Ceph
# (Pacific); this runs the interop smoke against each release run from a
# Debian root (built once into $${PURERBD_CACHE:-/var/cache/purerbd}/roots):
# rados objects and omap both ways with the release's rados, placement
# against its osdmap, image headers, snapshots, clones and object maps both
# ways with its rbd, exclusive-lock handover with a running librbd,
# monitor failover, csi-sanity against the purerbd-csi binary, and the
# demo (PURERBD_CEPH=RELEASE make demo) with that release's own rbd.
MATRIX_RELEASES := reef tentacle
MATRIX_TESTS := TestObjectsInteropWithRadosCLI TestOmapInteropWithRadosCLI TestLocateMatchesCephOSDMap \
	TestCreateHeaderMatchesLibrbd TestSnapshotsBothWays TestClones TestObjectMapCheck TestExclusiveLockHandover \
	TestFailover TestSanityBinary TestDemo
matrix:
	@for r in $(MATRIX_RELEASES); do \
		log=$$(mktemp); start=$$(date +%s); \
		PURERBD_CEPH=$$r $(GO) test -count=1 -timeout 20m -v -run '^($(subst $(eval) ,|,$(MATRIX_TESTS)))$$' \
			./rados/ ./rbd/ ./rados/monc/ ./cmd/purerbd-csi/ ./internal/cmd/purerbd-dev/ >$$log 2>&1; rc=$$?; \
		missing=""; for t in $(MATRIX_TESTS); do grep -q -- "^--- PASS: $$t " $$log || missing="$$missing $$t"; done; \
		if [ "$$rc" != 0 ] || [ -n "$$missing" ]; then \
			cat $$log; rm -f $$log; echo "matrix: Ceph $$r FAILED (go test exit $$rc; not passed:$$missing)"; exit 1; fi; \
		grep -E '^(ok|---) ' $$log; rm -f $$log; \
		echo "matrix: Ceph $$r: all passed ($$(( $$(date +%s) - start ))s): $(MATRIX_TESTS)"; \
	done

# the VM tests alone (root, qemu with KVM, the Debian kernel; the RBD one
# boots its own Ceph cluster): exit 0 only when every one of E2E_TESTS
# ran and passed
E2E_TESTS := TestKernelInVM TestNBDMapInVM TestRBDNBDInVM TestNodeInVM TestNodeRBDInVM
e2e:
	@log=$$(mktemp); rcf=$$(mktemp); start=$$(date +%s); \
	{ $(GO) test -count=1 -timeout 30m -v -run '^($(subst $(eval) ,|,$(E2E_TESTS)))$$' \
		./nbd/kernel/ ./cmd/purerbd/ ./csi/; echo $$? >$$rcf; } 2>&1 | tee $$log; \
	rc=$$(cat $$rcf); missing=""; \
	for t in $(E2E_TESTS); do grep -q -- "^--- PASS: $$t " $$log || missing="$$missing $$t"; done; \
	rm -f $$log $$rcf; echo "e2e: $$(( $$(date +%s) - start ))s"; \
	if [ "$$rc" != 0 ] || [ -n "$$missing" ]; then echo "e2e FAILED (go test exit $$rc; not passed:$$missing)"; exit 1; fi; \
	echo "e2e: all passed: $(E2E_TESTS)"

# the kernel smoke test (nbd/kernel TestKernelSmokeInVM: nbd.ko.xz loaded
# through kernel.LoadModule, attach/write/read/detach, a CONNECT from
# another network namespace) on the Debian kernels of VM_KERNELS, one
# boot each, one after the other; each suite's kernel is fetched once into
# $${PURERBD_CACHE:-/var/cache/purerbd}/kernels (nothing is installed);
# then the CSI node on ublk (csi TestNodeUblkInVM: the node scenario with
# 20 SIGKILLs of the plugin, at its defaults choosing ublk) on
# UBLK_NODE_KERNEL, a kernel whose ublk resizes live devices. Tests that
# boot a kernel of their own run here, not in `make unit`
# (VM_KERNEL_ONLY).
VM_KERNELS ?= trixie sid
UBLK_NODE_KERNEL ?= sid
VM_KERNEL_ONLY := TestNodeUblkInVM
# On a failure, before the log's tail: the test's own failure lines and
# the guest kernel's first Oops, BUG or panic with what follows it (a
# guest that dies in a storm of them leaves only the last in the tail).
VM_FIRST_ERROR = echo "-- failures:"; grep -E -m5 -e '^\s+\S+_test\.go:[0-9]+: ' $$log | grep -v -E 'vmtest: kernel|VM: boot' | cut -c1-500; \
	echo "-- the guest kernel's first error:"; grep -E -m1 -B2 -A45 -e 'Oops|BUG: |Kernel panic|WARNING: CPU' $$log | head -n 50; echo "-- the log's tail:";
vm-kernels:
	@fail=""; start=$$(date +%s); for k in $(VM_KERNELS); do \
		echo "== vm-kernels: $$k"; log=$$(mktemp); \
		PURERBD_KERNEL=$$k $(GO) test -count=1 -timeout 20m -v -run '^(TestKernelSmokeInVM|TestUblkInVM|TestDeviceMapInVM)$$' \
			./nbd/kernel/ ./nbd/ublk/ ./cmd/purerbd/ >$$log 2>&1 && \
			grep -q -- '^--- PASS: TestKernelSmokeInVM ' $$log && grep -q -- '^--- PASS: TestUblkInVM ' $$log && \
			grep -q -- '^--- PASS: TestDeviceMapInVM ' $$log || fail="$$fail $$k"; \
		grep -E -e '^(--- |ok |FAIL)' -e 'vmtest: kernel|VM: boot|loaded by|:   (load nbd|memory|CONNECT|open netlink)' \
			-e 'ublk/nbd ratios|SIGKILL of the server' $$log; \
		case " $$fail " in *" $$k "*) $(VM_FIRST_ERROR) tail -n 60 $$log;; esac; rm -f $$log; \
	done; \
	echo "== vm-kernels: the CSI node on ublk, $(UBLK_NODE_KERNEL)"; log=$$(mktemp); \
	PURERBD_KERNEL=$(UBLK_NODE_KERNEL) $(GO) test -count=1 -timeout 20m -v -run '^TestNodeUblkInVM$$' ./csi/ >$$log 2>&1 && \
		grep -q -- '^--- PASS: TestNodeUblkInVM ' $$log || fail="$$fail node-ublk-$(UBLK_NODE_KERNEL)"; \
	grep -E -e '^(--- |ok |FAIL)' -e 'vmtest: kernel|VM: kernel|stall (median|p99|max)|to plugin serving|e2fsck|xfs_repair' $$log; \
	case " $$fail " in *" node-ublk-"*) $(VM_FIRST_ERROR) tail -n 80 $$log;; esac; rm -f $$log; \
	echo "vm-kernels: $$(( $$(date +%s) - start ))s"; \
	if [ -n "$$fail" ]; then echo "vm-kernels FAILED:$$fail"; exit 1; fi; echo "vm-kernels: passed on $(VM_KERNELS)"

# Kubernetes in the loop (package deploy/e2e): the shipped manifests under
# a real kubelet in a VM, every scenario on one cluster; prints one line
# per scenario. The Kubernetes components and the sidecar images are built
# once into $${PURERBD_CACHE:-/var/cache/purerbd}. PURERBD_E2E_SCENARIOS=a,b
# runs only those scenarios (CI leaves it unset: all of them).
e2e-k8s:
	@log=$$(mktemp); rcf=$$(mktemp); start=$$(date +%s); \
	{ $(GO) test -count=1 -timeout 80m -v ./deploy/e2e/ ./deploy/e2e/images/; echo $$? >$$rcf; } 2>&1 | tee $$log; \
	rc=$$(cat $$rcf); echo; echo "e2e-k8s summary ($$(( $$(date +%s) - start ))s):"; grep '^e2e-k8s: ' $$log; \
	fails=$$(grep -c '^e2e-k8s: .*: FAIL' $$log); rm -f $$log $$rcf; \
	if [ "$$rc" != 0 ] || [ "$$fails" != 0 ]; then echo "e2e-k8s FAILED (go test exit $$rc)"; exit 1; fi

fuzz-smoke:
	FUZZTIME=$(TESTFUZZTIME) .ci/fuzz

fuzz:
	FUZZTIME=$(FUZZTIME) .ci/fuzz

# `make bench [CEPH=pacific,reef,tentacle] [CLUSTER=tuned,untuned]`: the
# Ceph releases and cluster kinds of the RADOS and RBD sections
bench:
	@$(GO) test -run '^$$' -bench . -benchmem -benchtime 100ms ./...; gobench=$$?; \
	$(GO) run ./bench/cmd/purerbd-bench $(if $(CEPH),-ceph $(CEPH)) $(if $(CLUSTER),-cluster $(CLUSTER)) && exit $$gobench

clean:
	rm -rf bin/

# a long chaos run: `make chaos DURATION=10m [SEED=n]` (package rbd/chaostest)
chaos:
	$(GO) run -trimpath ./internal/cmd/purerbd-dev chaos --duration $(or $(DURATION),10m) $(if $(SEED),--seed $(SEED))
