#!/usr/bin/env bash
# fetch-kernel.sh SUITE: fetch (once) the kernel of a Debian suite other than
# the host's, for VM tests that boot it (package nbd/kernel/vmtest,
# PURERBD_KERNEL=SUITE). Nothing is installed on the host: apt runs with a
# sources list, state and cache of its own under the cache directory, only
# downloads, and dpkg-deb unpacks the package into
# ${PURERBD_CACHE:-/var/cache/purerbd}/kernels/SUITE, where depmod makes its
# modules.dep. The modules stay compressed as the package ships them.
# A stamp file marks a finished tree; with it present this is a no-op.
set -euo pipefail

suite=${1:?usage: fetch-kernel.sh SUITE (e.g. trixie, sid)}
cache=${PURERBD_CACHE:-/var/cache/purerbd}
dest=$cache/kernels/$suite
stamp=$dest/.purerbd-kernel-ok

if [ -f "$stamp" ]; then
  echo "fetch-kernel: $dest ready ($(cat "$stamp"))"
  exit 0
fi
mkdir -p "$cache/kernels"
# test packages run in parallel: one fetches, the others wait for it
exec 9>"$cache/kernels/.$suite.lock"
flock 9
if [ -f "$stamp" ]; then
  echo "fetch-kernel: $dest ready ($(cat "$stamp"))"
  exit 0
fi

# the host's Debian mirror (deb822 or one-line sources), else the default
mirror=$(grep -rhoE '^(URIs:[[:space:]]*|deb[[:space:]]+)https?://[^[:space:]]+/debian/?([[:space:]]|$)' \
  /etc/apt/sources.list /etc/apt/sources.list.d/ 2>/dev/null |
  grep -oE 'https?://[^[:space:]]+' | head -n1 || true)
mirror=${mirror:-http://deb.debian.org/debian}
keyring=/usr/share/keyrings/debian-archive-keyring.gpg

start=$(date +%s)
# a half-fetched tree from an interrupted run is thrown away, not resumed
rm -rf "$dest"
tmp=$(mktemp -d "$cache/kernels/.$suite.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
apt=$tmp/apt
mkdir -p "$apt/state/lists/partial" "$apt/cache/archives/partial" "$apt/etc" "$tmp/debs" "$tmp/root"
echo "deb [signed-by=$keyring] $mirror $suite main" >"$apt/etc/sources.list"
: >"$apt/state/status"
# every apt path points into $apt: the host's sources, pins, lists and
# dpkg status are neither read nor written
aptopts=(
  -q -o "Dir::Etc::SourceList=$apt/etc/sources.list" -o Dir::Etc::SourceParts=/dev/null
  -o Dir::Etc::Preferences=/dev/null -o Dir::Etc::PreferencesParts=/dev/null
  -o "Dir::State=$apt/state" -o "Dir::State::status=$apt/state/status"
  -o "Dir::Cache=$apt/cache" -o Acquire::Languages=none -o APT::Architecture=amd64
  -o APT::Architectures::=amd64 -o APT::Sandbox::User=root
)
echo "fetch-kernel: apt-get update for $suite from $mirror"
apt-get "${aptopts[@]}" update >"$tmp/update.log" 2>&1 || {
  cat "$tmp/update.log" >&2
  exit 1
}

# linux-image-amd64 is a metapackage: the kernel is the versioned
# linux-image-* package it depends on
image=$(apt-cache "${aptopts[@]}" depends --no-recommends --no-suggests linux-image-amd64 |
  sed -n 's/^ *Depends: \(linux-image-[^ ]*\).*/\1/p' | head -n1)
if [ -z "$image" ]; then
  echo "fetch-kernel: linux-image-amd64 in $suite names no linux-image-* package" >&2
  exit 1
fi
# since Linux 7.x (sid) that package is empty itself and depends on the
# parts, named for the same release: linux-binary-<rel> (the image),
# linux-modules-<rel>, linux-base-<rel> (modules.builtin and the like)
flavour=${image#linux-image-}
parts=$(apt-cache "${aptopts[@]}" depends --no-recommends --no-suggests "$image" |
  awk -v f="-$flavour" '$1 == "Depends:" && $2 ~ /^linux-[a-z]+-/ &&
    substr($2, length($2) - length(f) + 1) == f { print $2 }' | sort -u)
echo "fetch-kernel: downloading $image" $parts
(cd "$tmp/debs" && apt-get "${aptopts[@]}" download "$image" $parts)
for deb in "$tmp"/debs/*.deb; do
  dpkg-deb -x "$deb" "$tmp/root"
done

# modules live under /usr/lib/modules in newer packages, /lib/modules in
# older ones; the tree keeps them at lib/modules
if [ -d "$tmp/root/usr/lib/modules" ] && [ ! -e "$tmp/root/lib" ]; then
  ln -s usr/lib "$tmp/root/lib"
fi
rel=$(ls "$tmp/root/lib/modules" | head -n1)
# the image is boot/vmlinuz-<rel>, or (7.x) lib/modules/<rel>/vmlinuz: the
# tree always has the former, as the host's /boot does
if [ -n "$rel" ] && [ ! -e "$tmp/root/boot/vmlinuz-$rel" ] && [ -f "$tmp/root/lib/modules/$rel/vmlinuz" ]; then
  mkdir -p "$tmp/root/boot"
  ln -s "../lib/modules/$rel/vmlinuz" "$tmp/root/boot/vmlinuz-$rel"
fi
if [ -z "$rel" ] || [ ! -f "$tmp/root/boot/vmlinuz-$rel" ]; then
  echo "fetch-kernel: $image holds no boot/vmlinuz-<release> with lib/modules/<release>" >&2
  exit 1
fi
# the package ships no modules.dep (its postinst runs depmod): make it,
# for this tree only
depmod -b "$tmp/root" "$rel"
if [ ! -s "$tmp/root/lib/modules/$rel/modules.dep" ]; then
  echo "fetch-kernel: depmod made no modules.dep for $rel" >&2
  exit 1
fi
nbd=$(grep -oE '^[^:]*/nbd\.ko[^:]*' "$tmp/root/lib/modules/$rel/modules.dep" || true)
version=$(dpkg-deb -f "$tmp"/debs/"${image}"_*.deb Version)

rm -rf "$apt" "$tmp/debs" "$tmp/update.log"
mv "$tmp" "$dest"
trap - EXIT
printf 'release=%s package=%s version=%s nbd=%s fetched_in=%ss\n' \
  "$rel" "$(echo $image $parts | tr ' ' ',')" "$version" "${nbd:-none}" "$(($(date +%s) - start))" >"$stamp"
echo "fetch-kernel: $dest ready ($(cat "$stamp"))"
