#!/bin/bash
# Build the Charliecloud image the tests run jobs in: Debian 12 (mmdebstrap, no Docker)
# with Python and this machine's versions of JAX, NumPy, optax and orbax-checkpoint from
# PyPI, and NOT hpcjax: it stands for a site's stock JAX image, into which hpcjax binds
# its own rank side at launch. Prints the image directory on stdout.
#
#   bash containers/charliecloud-image.sh            # as root; about 2 minutes the first time
#
# The image is kept between runs under $HPCJAX_DEVCLUSTER_DIR/images, keyed by this file
# and the versions, so a second run returns at once.
set -euo pipefail

state=${HPCJAX_DEVCLUSTER_DIR:-/var/lib/hpcjax-devcluster}
python=${PYTHON:-python3}
packages=$("$python" -c 'import importlib.metadata as m
print(" ".join(f"{p}=={m.version(p)}" for p in ("jax", "jaxlib", "ml_dtypes", "numpy", "optax", "orbax-checkpoint")))')
key=$( { cat "$0"; echo "$packages"; } | sha256sum | cut -c1-12)
image="$state/images/jax-$key"
if [ -e "$image/.hpcjax-image-complete" ]; then
  echo "$image"
  exit 0
fi
say() { echo "charliecloud-image: $*" >&2; }
missing=()
command -v ch-run >/dev/null || missing+=(charliecloud-runtime)
command -v mmdebstrap >/dev/null || missing+=(mmdebstrap)
if [ ${#missing[@]} -gt 0 ]; then
  say "installing ${missing[*]}"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}" >&2
fi
export USER=${USER:-$(id -un)}  # ch-run refuses to start without it

# The Debian mirror apt already uses here (deb822 or one-line sources).
mirror=$(sed -n 's/^URIs: *\([^ ]*\).*/\1/p' /etc/apt/sources.list.d/*.sources 2>/dev/null | grep -v security | head -1)
[ -n "$mirror" ] || mirror=$(awk '$1 == "deb" && $2 !~ /security/ {print $2; exit}' /etc/apt/sources.list 2>/dev/null)
mirror=${mirror:-http://deb.debian.org/debian}

partial="$image.partial"
rm -rf "$partial"
mkdir -p "$state/images"
# mmdebstrap: apt and dpkg in one pass (debootstrap's second stage goes package by package, at about
# twice the CPU: slurm/devcluster/root.sh has the figures); the image is built beside the tests.
say "mmdebstrap bookworm from $mirror (about half a minute)"
mmdebstrap --quiet --variant=minbase --include=python3,python3-pip bookworm "$partial" "$mirror" >&2
# The wheels come through this machine's installer (its index and certificates; the image needs
# no network configuration of its own): by uv where it is installed (scripts/test.sh installs it),
# straight from its cache, where this machine's own install left the same wheels, into the
# image's site directory (CPython 3.11 in both: the same wheels and bytecode); else pip downloads
# them (again: 200 MB) and the image's own pip installs them offline.
site=$partial/usr/local/lib/python3.11/dist-packages
wheels="$state/images/wheels-$key"
say "installing $packages"
if "$python" -m uv --version >/dev/null 2>&1 && [ -x "$partial/usr/bin/python3.11" ]; then
  # shellcheck disable=SC2086  # $packages is a list of requirement words
  "$python" -m uv pip install -q --compile-bytecode --python "$python" --target "$site" $packages >&2
else
  # shellcheck disable=SC2086  # $packages is a list of requirement words
  "$python" -m pip download -q --only-binary=:all: -d "$wheels" $packages >&2
  mkdir -p "$partial/wheels"
  # shellcheck disable=SC2086  # $packages is a list of requirement words
  ch-run -w --unset-env="PIP_*" -b "$wheels:/wheels" "$partial" -- \
    python3 -m pip install -q --break-system-packages --no-index --find-links /wheels $packages >&2
  rmdir "$partial/wheels"
fi
# ch-run binds the host's /etc/hosts only onto an existing file: without it the nodes'
# names do not resolve inside and no rank finds the coordinator.
touch "$partial/etc/hosts"
touch "$partial/.hpcjax-image-complete"
rm -rf "$image" "$wheels"
mv "$partial" "$image"
# Images of earlier versions of this recipe are not used again.
find "$state/images" -maxdepth 1 -name 'jax-*' ! -name "jax-$key" ! -name '*.partial' -exec rm -rf {} +
say "built $image"
echo "$image"
