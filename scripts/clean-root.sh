#!/usr/bin/env bash
# clean-root.sh DEST: makes DEST (absent or empty) a Debian bookworm root holding nothing but what debootstrap's
# minbase variant gives, with the apt sources a fresh Debian 12 machine has (bookworm, bookworm-updates,
# bookworm-security, main) on this machine's mirror. DEST is a copy of a root made once per machine and kept outside
# the tree (SHRINK_CLEAN_ROOT, default /var/tmp/shrink-bookworm-minbase; made again when absent, and never changed
# after it is made), so each user of it starts clean: scripts/fresh-machine-check.sh and benchmarks/gpu/pack.sh
# --check-clean. Needs root and debootstrap (scripts/setup-debian.sh root).
set -euo pipefail

if (($# != 1)); then
  echo "usage: clean-root.sh DEST" >&2
  exit 2
fi
dest=$1
cached=${SHRINK_CLEAN_ROOT:-/var/tmp/shrink-bookworm-minbase}
if [[ $(id -u) -ne 0 ]]; then
  echo "clean-root: debootstrap and chroot need root" >&2
  exit 1
fi
if [[ -e $dest && -n $(ls -A "$dest") ]]; then
  echo "clean-root: $dest exists and is not empty" >&2
  exit 1
fi

if [[ ! -x $cached/bin/bash ]]; then
  "$(dirname "${BASH_SOURCE[0]}")/setup-debian.sh" root >/dev/null
  # This machine's Debian mirror (a proxy or snapshot where it has one; its security archive likewise), else Debian's.
  sources=$({ cat /etc/apt/sources.list.d/*.sources /etc/apt/sources.list 2>/dev/null || true; } |
    sed -nE 's/^URIs: *([^ ]+).*/\1/p; s/^deb +(\[[^]]*\] +)?([^ ]+) +bookworm.*/\2/p')
  mirror=$(grep -v -- '-security' <<<"$sources" | head -n 1 || true)
  security=$(grep -- '-security' <<<"$sources" | head -n 1 || true)
  mirror=${mirror:-http://deb.debian.org/debian}
  security=${security:-http://deb.debian.org/debian-security}

  # Made beside its final place and renamed when complete: an interrupted run leaves no half-made root to reuse.
  partial=$cached.partial-$$
  trap 'rm -rf "$partial"' EXIT
  rm -rf "$partial"
  echo "clean-root: debootstrap --variant=minbase bookworm $cached ($mirror)" >&2
  debootstrap --variant=minbase bookworm "$partial" "$mirror" >/dev/null
  rm -f "$partial/etc/apt/sources.list"
  cat >"$partial/etc/apt/sources.list.d/debian.sources" <<EOF
Types: deb
URIs: $mirror
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: $security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
  rm -rf "$cached"
  mv "$partial" "$cached"
  trap - EXIT
fi

mkdir -p "$dest"
cp -a "$cached/." "$dest/"
