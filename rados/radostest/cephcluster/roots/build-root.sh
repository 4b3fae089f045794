#!/usr/bin/env bash
# build-root.sh SUITE: build (once) a Debian root holding the Ceph daemons and
# tools of the given suite, for tests that run a Ceph release other than the
# host's (rados/radostest runs its binaries with chroot). The root lives in a
# cache outside the checkout: ${PURERBD_CACHE:-/var/cache/purerbd}/roots/SUITE.
# A stamp file marks a finished root and names the packages it holds; with
# the stamp present and the same package list this is a no-op, and a root
# built with fewer packages gets the missing ones installed into it.
# The host's own packages and apt sources are never touched: debootstrap
# writes only into the root, and apt runs inside it.
#
# build-root.sh SUITE EXTRA...: the same, then the extra packages (the
# benchmark suite's peers: fio, qemu-utils) installed into the root on
# demand. They are recorded apart, one a line in .purerbd-root-extras, so
# the stamp and its package list stay what the tests check, and a run
# without extras (the tests', CI's) does exactly what it did before.
set -euo pipefail

suite=${1:?usage: build-root.sh SUITE [EXTRA-PACKAGE...] (e.g. sid)}
shift
extras=("$@")
cache=${PURERBD_CACHE:-/var/cache/purerbd}
root=$cache/roots/$suite
stamp=$root/.purerbd-root-ok
extras_stamp=$root/.purerbd-root-extras
# ceph-mgr for the tests that split PGs or read the mgr's reports
packages="ceph-mon ceph-osd ceph-mgr ceph-common"

# ready: the stamp exists and names exactly this package list
ready() {
  [ -f "$stamp" ] && grep -qxF "packages: $packages" "$stamp"
}

# missing_extras: the extra packages the extras stamp does not name
missing_extras() {
  local p
  for p in "${extras[@]}"; do
    grep -qxF "$p" "$extras_stamp" 2>/dev/null || echo "$p"
  done
}

# finish: install the missing extras (under the suite's lock), then exit
finish() {
  local missing
  missing=$(missing_extras)
  if [ -z "$missing" ]; then
    exit 0
  fi
  if [ "$(id -u)" != 0 ]; then
    echo "build-root: installing $missing into $root needs root" >&2
    exit 1
  fi
  exec 9>"$cache/roots/.$suite.lock"
  flock 9
  missing=$(missing_extras)
  if [ -z "$missing" ]; then
    exit 0
  fi
  echo "build-root: adding extras to $root:" $missing
  trap 'umount "$root/proc" 2>/dev/null || true' EXIT
  chroot "$root" apt-get update -q -o Acquire::Check-Valid-Until=false
  mount -t proc proc "$root/proc"
  # shellcheck disable=SC2086 # one package a word
  chroot "$root" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $missing
  umount "$root/proc"
  trap - EXIT
  chroot "$root" apt-get clean
  # only what apt reports installed is recorded
  for p in $missing; do
    if chroot "$root" dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
      echo "$p" >>"$extras_stamp"
    else
      echo "build-root: $p did not install into $root" >&2
      exit 1
    fi
  done
  echo "build-root: $root has extras: $(tr '\n' ' ' <"$extras_stamp")"
  exit 0
}

if ready; then
  echo "build-root: $root ready ($(head -n1 "$stamp"))"
  finish
fi
if [ "$(id -u)" != 0 ]; then
  echo "build-root: needs root (debootstrap, chroot)" >&2
  exit 1
fi
mkdir -p "$cache/roots"
# test packages run in parallel: one builds, the others wait for it
exec 9>"$cache/roots/.$suite.lock"
flock 9
if ready; then
  echo "build-root: $root ready ($(head -n1 "$stamp"))"
  flock -u 9
  finish
fi

# install: apt-get install the package list inside root (proc mounted for
# the maintainer scripts). ceph-mon's maintainer script needs systemd and
# fails here; the binaries are unpacked all the same, so what can be
# settled is settled and the binaries themselves are checked afterwards.
install_packages() {
  local r=$1
  mount -t proc proc "$r/proc"
  chroot "$r" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
    --no-install-recommends $packages ||
    chroot "$r" env DEBIAN_FRONTEND=noninteractive dpkg --configure -a || true
  umount "$r/proc"
}

# check: every binary the tests run is in root
check() {
  local r=$1 b
  for b in ceph-mon ceph-osd ceph-mgr ceph ceph-authtool monmaptool rados rbd crushtool osdmaptool; do
    chroot "$r" sh -c "command -v $b" >/dev/null || {
      echo "build-root: $b missing from the root" >&2
      exit 1
    }
  done
}

start=$(date +%s)
if [ -f "$stamp" ]; then
  # a finished root of an older package list: add what is missing
  # (the old stamp stays until the new one replaces it: it does not name
  # this list, so an interrupted run is retried)
  echo "build-root: adding to $root: $packages"
  trap 'umount "$root/proc" 2>/dev/null || true' EXIT
  # the mirror may serve a suite whose Release file is past Valid-Until
  # (as debootstrap, which does not check it, accepted)
  chroot "$root" apt-get update -q -o Acquire::Check-Valid-Until=false
  install_packages "$root"
  trap - EXIT
  check "$root"
  version=$(chroot "$root" ceph-mon --version | head -n1)
  chroot "$root" apt-get clean
  printf '%s; extended in %ss\npackages: %s\n' "$version" "$(($(date +%s) - start))" "$packages" >"$stamp.tmp"
  mv "$stamp.tmp" "$stamp"
  echo "build-root: $root ready ($(head -n1 "$stamp"))"
  flock -u 9
  finish
fi

# debootstrap is a shell script: without it on the host, unpack the host's
# own package of it into the cache and run it from there (nothing installed)
debootstrap=$(command -v debootstrap || true)
if [ -z "$debootstrap" ]; then
  tooldir=$cache/tools/debootstrap
  mkdir -p "$cache/tools"
  # the suites' builds run side by side: one unpacks, the others wait,
  # and the unpacked tree appears whole or not at all
  exec 8>"$cache/tools/.debootstrap.lock"
  flock 8
  if [ ! -x "$tooldir/usr/sbin/debootstrap" ]; then
    unpack=$(mktemp -d "$cache/tools/.debootstrap.XXXXXX")
    (cd "$unpack" && apt-get download -q debootstrap && dpkg -x debootstrap_*.deb .)
    rm -rf "$tooldir" && mv "$unpack" "$tooldir"
  fi
  flock -u 8
  export DEBOOTSTRAP_DIR=$tooldir/usr/share/debootstrap
  debootstrap=$tooldir/usr/sbin/debootstrap
fi

# the host's Debian mirror (deb822 or one-line sources), else the default
mirror=$(grep -rhoE '^(URIs:[[:space:]]*|deb[[:space:]]+)https?://[^[:space:]]+/debian/?([[:space:]]|$)' \
  /etc/apt/sources.list /etc/apt/sources.list.d/ 2>/dev/null |
  grep -oE 'https?://[^[:space:]]+' | head -n1 || true)
mirror=${mirror:-http://deb.debian.org/debian}

# a half-built root from an interrupted run is thrown away, not resumed
rm -rf "$root"
tmp=$(mktemp -d "$cache/roots/.$suite.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

echo "build-root: debootstrap $suite from $mirror into $tmp"
"$debootstrap" --variant=minbase "$suite" "$tmp" "$mirror"

# no service may start inside the root: maintainer scripts that try fail
# softly (101 = action forbidden by policy)
printf '#!/bin/sh\nexit 101\n' >"$tmp/usr/sbin/policy-rc.d"
chmod 755 "$tmp/usr/sbin/policy-rc.d"

trap 'umount "$tmp/proc" 2>/dev/null || true; rm -rf "$tmp"' EXIT
install_packages "$tmp"
check "$tmp"
version=$(chroot "$tmp" ceph-mon --version | head -n1)
chroot "$tmp" apt-get clean
printf '%s; built in %ss\npackages: %s\n' "$version" "$(($(date +%s) - start))" "$packages" >"$tmp/.purerbd-root-ok"
mv "$tmp" "$root"
trap - EXIT
echo "build-root: $root ready ($(head -n1 "$stamp"))"
flock -u 9
finish
