#!/usr/bin/env bash
# The cluster user (cluster-user.sh) on a release's cluster whose login side and ranks run that
# Debian release's own Python, not this machine's: in the release's root, Debian's python3 (3.13 on
# Debian 13) with a venv of JAX at /usr/local/hpcjax-cluster-python (that Python's own wheels and
# cloudpickle, never hpcjax: hpcjax ships itself), the user's account, a login profile that puts the
# venv and the release's SLURM_CONF first, and OpenSSH's sshd for the tests' private server
# (tests/sshd.py starts it inside the root). Idempotent; prints the user's name. Needs root.
#
#   root-user.sh RELEASE     (24.11: Debian 13's Python 3.13)
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=common.sh
source "$here/common.sh"
# shellcheck source-path=SCRIPTDIR source=releases.sh
source "$here/releases.sh"
release=${1:?usage: root-user.sh RELEASE}
release_row "$release"
[[ -n $SUITE ]] || die "release $release runs this machine's Python: cluster-user.sh is its cluster user"
root=$(root_of "$SLURM_SUITE")
venv=/usr/local/hpcjax-cluster-python
user=$(bash "$here/cluster-user.sh")  # the account and its home (/home is shared with the root)
mkdir -p "$DIR/run" "$DIR/log"
exec 9>"$root.user.lock"
flock 9
log_file="$DIR/log/root-user-$SLURM_SUITE.log"
inside() { bash "$here/enter.sh" "$release" "$@"; }

if [[ ! -x $root/usr/sbin/sshd || ! -x $root/usr/bin/python3 || ! -x $root/usr/bin/rsync ]]; then
  log "adding Debian's python3, openssh-server and rsync (hpcjax ships code with it) to the $SUITE root"
  DEBIAN_FRONTEND=noninteractive chroot "$root" apt-get install -y -qq --no-install-recommends python3 python3-venv \
    openssh-server rsync >"$log_file" 2>&1 || { tail -n 20 "$log_file" >&2; die "apt-get in the root failed"; }
fi
mkdir -p "$root/run/sshd"
# The machine's CA bundle (a registry behind a proxy of the site's own CA): the root's pip and uv use it.
cp /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/hpcjax-machine-ca.crt"
if ! chroot "$root" "$venv/bin/python" -c "import jax, optax, orbax.checkpoint" 2>/dev/null; then
  log "making the $SUITE root's Python environment at $venv (jax, jaxlib, numpy, optax, orbax-checkpoint)"
  chroot "$root" /usr/bin/python3 -m venv "$venv"
  # The laptop's versions of JAX (so the ranks compute alike), for this Python; its cloudpickle is
  # whatever that Python gets: the laptop's and the cluster's differ, as they do on real sites.
  pins=$(python3 -m pip list --format=freeze 2>/dev/null | grep -iE '^(jax|jaxlib|ml.dtypes|optax|orbax-checkpoint)==' || true)
  # uv of this machine's Python (the root shares it, and the installer's cache), else the venv's pip
  machine_python=$(python3 -c 'import sys; print(sys.executable)')
  uv=("$machine_python" -m uv pip install -q --python "$venv/bin/python")
  "$machine_python" -m uv --version >/dev/null 2>&1 || uv=("$venv/bin/python" -m pip install -q)
  # shellcheck disable=SC2086 # one argument per pin
  inside env SSL_CERT_FILE=/etc/ssl/certs/hpcjax-machine-ca.crt PIP_CERT=/etc/ssl/certs/hpcjax-machine-ca.crt \
    "${uv[@]}" ${pins:-jax jaxlib optax orbax-checkpoint} numpy cloudpickle >>"$log_file" 2>&1 \
    || { tail -n 20 "$log_file" >&2; die "the root's Python environment would not install (log above)"; }
fi
# The account as the root knows it: the same uid, gid and home as on this machine.
for file in passwd group shadow; do
  entry=$(grep "^$user:" "/etc/$file" || true)
  if [[ -n $entry ]] && ! grep -q "^$user:" "$root/etc/$file"; then echo "$entry" >>"$root/etc/$file"; fi
done
# Its login: read before ~/.profile (which leaves PATH and SLURM_CONF alone where this is set).
cat >"$root/etc/profile.d/hpcjax-cluster.sh" <<PROFILE
# written by hpcjax's slurm/devcluster/root-user.sh: this root's Python and SLURM first
export HPCJAX_CLUSTER_ROOT=$release
export PATH="$venv/bin:\$PATH"
export SLURM_CONF="$(state_of "$release")/etc/slurm.conf"
PROFILE
echo "$user"
