#!/usr/bin/env bash
# build-root.sh SUITE: build (once) a Debian root holding the Ceph daemons and
# tools of the given suite, for tests that run a Ceph release other than the
# host's (rados/radostest runs its binaries with chroot). The root lives in a
# cache outside the checkout: ${PURERBD_CACHE:-/var/cache/purerbd}/roots/SUITE.
# A stamp file marks a finished root; with the stamp present this is a no-op.
# The host's own packages and apt sources are never touched: debootstrap
# writes only into the root, and apt runs inside it.
set -euo pipefail

suite=${1:?usage: build-root.sh SUITE (e.g. sid)}
cache=${PURERBD_CACHE:-/var/cache/purerbd}
root=$cache/roots/$suite
stamp=$root/.purerbd-root-ok
packages="ceph-mon ceph-osd ceph-common"

if [ -f "$stamp" ]; then
  echo "build-root: $root ready ($(cat "$stamp"))"
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  echo "build-root: needs root (debootstrap, chroot)" >&2
  exit 1
fi
mkdir -p "$cache/roots"
# test packages run in parallel: one builds, the others wait for it
exec 9>"$cache/roots/.$suite.lock"
flock 9
if [ -f "$stamp" ]; then
  echo "build-root: $root ready ($(cat "$stamp"))"
  exit 0
fi
# debootstrap is a shell script: without it on the host, unpack the host's
# own package of it into the cache and run it from there (nothing installed)
debootstrap=$(command -v debootstrap || true)
if [ -z "$debootstrap" ]; then
  tooldir=$cache/tools/debootstrap
  if [ ! -x "$tooldir/usr/sbin/debootstrap" ]; then
    rm -rf "$tooldir" && mkdir -p "$tooldir"
    (cd "$tooldir" && apt-get download -q debootstrap && dpkg -x debootstrap_*.deb .)
  fi
  export DEBOOTSTRAP_DIR=$tooldir/usr/share/debootstrap
  debootstrap=$tooldir/usr/sbin/debootstrap
fi

# the host's Debian mirror (deb822 or one-line sources), else the default
mirror=$(grep -rhoE '^(URIs:[[:space:]]*|deb[[:space:]]+)https?://[^[:space:]]+/debian/?([[:space:]]|$)' \
  /etc/apt/sources.list /etc/apt/sources.list.d/ 2>/dev/null |
  grep -oE 'https?://[^[:space:]]+' | head -n1 || true)
mirror=${mirror:-http://deb.debian.org/debian}

start=$(date +%s)
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

mount -t proc proc "$tmp/proc"
trap 'umount "$tmp/proc" 2>/dev/null || true; rm -rf "$tmp"' EXIT
chroot "$tmp" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
  --no-install-recommends $packages || {
  # ceph-mon's maintainer script needs systemd and fails here; the binaries
  # are unpacked all the same. Settle what can be settled, then check the
  # binaries themselves below.
  chroot "$tmp" env DEBIAN_FRONTEND=noninteractive dpkg --configure -a || true
}
umount "$tmp/proc"
trap 'rm -rf "$tmp"' EXIT

for b in ceph-mon ceph-osd ceph ceph-authtool monmaptool rados; do
  chroot "$tmp" sh -c "command -v $b" >/dev/null || {
    echo "build-root: $b missing from the root" >&2
    exit 1
  }
done
version=$(chroot "$tmp" ceph-mon --version | head -n1)
chroot "$tmp" apt-get clean
mv "$tmp" "$root"
trap - EXIT
echo "$version; built in $(($(date +%s) - start))s" >"$stamp"
echo "build-root: $root ready ($(cat "$stamp"))"
