#!/usr/bin/env bash
# Run a command inside a release's root (root.sh made it), in a mount namespace of its own: the
# root sees this machine's /proc, /dev, /sys, /etc/hosts and the paths jobs share at the same paths
# (/tmp, /root, /home, /opt, the dev clusters' state, this checkout, this machine's Python), so a
# job's ranks run the same hpcjax and JAX, while every SLURM binary and library is the release's own.
# Nothing is mounted on this machine's side: the namespace ends with its last process. Needs root.
#
#   enter.sh RELEASE CMD...     (the environment passes through as it is)
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=common.sh
source "$here/common.sh"
# shellcheck source-path=SCRIPTDIR source=releases.sh
source "$here/releases.sh"
release=${1:?usage: enter.sh RELEASE CMD...}
shift
release_row "$release"
[[ -n $SUITE ]] || exec "$@"  # this machine's own release
root=$(root_of "$SLURM_SUITE")
[[ -x $root/usr/sbin/slurmctld ]] || die "no root for SLURM $release at $root: run slurm/devcluster/root.sh $release"

# The paths shared with the root; one under another is shared with it.
shared=(/tmp /root /home /opt "$(state_of 22.05)")
[[ $release == 22.05 ]] || shared+=("$(state_of "$release")")
repo=$(cd "$here/../.." && pwd)
python_prefix=$(python3 -c 'import sys; print(sys.base_prefix)' 2>/dev/null || true)
for path in "$repo" "$python_prefix"; do
  [[ -n $path && $path != /usr && $path != /usr/* ]] || continue
  inside=""
  for bound in "${shared[@]}"; do [[ $path == "$bound" || $path == "$bound"/* ]] && inside=1; done
  [[ -n $inside ]] || shared+=("$path")
done

# The mounts and the chroot happen in the new namespace (unshare), by this script again.
if [[ ${HPCJAX_ENTER_MOUNTED:-} != "$root" ]]; then
  HPCJAX_ENTER_MOUNTED=$root exec unshare --mount --propagation private -- "$0" "$release" "$@"
fi
unset HPCJAX_ENTER_MOUNTED
for special in proc dev sys; do mount --rbind "/$special" "$root/$special"; done
for path in "${shared[@]}"; do
  [[ -d $path ]] || continue
  mkdir -p "$root$path"
  mount --bind "$path" "$root$path"
done
[[ -e $root/etc/hosts ]] || : >"$root/etc/hosts"
mount --bind /etc/hosts "$root/etc/hosts"  # node names, and this machine's own name (Gloo resolves it)
cwd=$PWD
# shellcheck disable=SC2016 # expanded by the shell inside the root
exec chroot "$root" /bin/sh -c 'cd "$1" 2>/dev/null || cd /; shift; exec "$@"' enter "$cwd" "$@"
