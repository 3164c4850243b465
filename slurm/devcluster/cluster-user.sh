#!/usr/bin/env bash
# The dev cluster's second Unix account, "the cluster user" of the tests that drive the
# cluster from a laptop over SSH (tests/hosts/): the tests' sshd logs in as this user, who
# submits the jobs and owns their files. It has what a real cluster account has and no
# more: a login shell whose PATH holds a Python with JAX (never hpcjax: hpcjax ships
# itself), and SLURM_CONF. The laptop side (root) keeps its files where this user cannot
# read them, so nothing can pass through a shared filesystem by accident.
# Idempotent; prints the user's name. Needs root on Debian 12.
#
#   HPCJAX_CLUSTER_USER     the account (default hpcjaxuser)
#   HPCJAX_CLUSTER_PYTHON   its Python environment (default /opt/hpcjax-cluster-python)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=common.sh
source "$here/common.sh"
user=${HPCJAX_CLUSTER_USER:-hpcjaxuser}
venv=${HPCJAX_CLUSTER_PYTHON:-/opt/hpcjax-cluster-python}
OLD_CLOUDPICKLE=2.1.0
[[ $(id -u) == 0 ]] || die "cluster-user.sh must run as root (it adds a Unix account)"
# One at a time: scripts/test.sh starts it in the background, and each test session's first
# laptop-to-cluster test runs it again (tests/conftest.py, ssh_cluster), which then waits here
# for the first to finish and finds everything made.
mkdir -p "$DIR/run"
exec 9>"$DIR/run/cluster-user.lock"
flock 9

id "$user" >/dev/null 2>&1 || useradd --create-home --shell /bin/bash "$user"
# No password, but not locked either: sshd refuses a locked account even with a key.
usermod -p '*' "$user"
home=$(getent passwd "$user" | cut -d: -f6)

# Installs into the cluster's Python: by uv where the laptop's Python has it (scripts/test.sh
# installs it: it takes the downloads from its cache, where the laptop's install left them), else
# pip. Compiled at install, as pip does: this user cannot write the bytecode into the venv.
if python3 -m uv --version >/dev/null 2>&1; then
  install=(python3 -m uv pip install -q --compile-bytecode --python "$venv/bin/python")
else
  install=("$venv/bin/python" -m pip install -q --disable-pip-version-check)
fi
# The same versions as the laptop's environment (so the installer reuses its downloads), from the
# Debian Python: the laptop's own may live under a directory this user cannot enter.
if [[ ! -x $venv/bin/python ]] || ! "$venv/bin/python" -c "import jax, optax, orbax.checkpoint" 2>/dev/null; then
  log "making the cluster user's Python at $venv (jax, jaxlib, numpy, optax, orbax-checkpoint)"
  /usr/bin/python3 -m venv "$venv"
  pins=$(python3 -m pip list --format=freeze 2>/dev/null \
           | grep -iE '^(jax|jaxlib|ml.dtypes|numpy|optax|orbax-checkpoint)==' || true)
  # shellcheck disable=SC2086 # one argument per pin
  "${install[@]}" ${pins:-jax jaxlib numpy optax orbax-checkpoint} \
    >"$DIR/log/cluster-python.log" 2>&1 || { tail -n 20 "$DIR/log/cluster-python.log" >&2; die "install failed"; }
  for package in jax jaxlib numpy optax orbax-checkpoint; do
    "$venv/bin/python" -m pip show -q "$package" >/dev/null 2>&1 || die "the cluster Python lacks $package"
  done
fi
# An older cloudpickle than the laptop's, as a cluster's site-packages may well have (issue 44): a
# call pickled on the laptop must still load there, with the copy hpcjax stages beside it.
if [[ $("$venv/bin/python" -m pip show cloudpickle 2>/dev/null | sed -n 's/^Version: //p') != "$OLD_CLOUDPICKLE" ]]; then
  "${install[@]}" "cloudpickle==$OLD_CLOUDPICKLE" \
    >>"$DIR/log/cluster-python.log" 2>&1 || { tail -n 20 "$DIR/log/cluster-python.log" >&2; die "install failed (cloudpickle)"; }
fi
# py-spy, as a site would install it for `hpcjax stacks` (the nodes need it; hpcjax does not ship it).
if [[ ! -x $venv/bin/py-spy ]]; then
  pin=$(python3 -m pip list --format=freeze 2>/dev/null | grep -iE '^py-spy==' || echo py-spy)
  "${install[@]}" "$pin" >>"$DIR/log/cluster-python.log" 2>&1 \
    || { tail -n 20 "$DIR/log/cluster-python.log" >&2; die "install failed (py-spy)"; }
fi
# jupyter-server, as a user adds it to their own environment for `hpcjax jupyter` (hpcjax installs nothing there).
if ! "$venv/bin/python" -c "import jupyter_server" 2>/dev/null; then
  pin=$(python3 -m pip list --format=freeze 2>/dev/null | grep -iE '^jupyter[_-]server==' || echo jupyter-server)
  "${install[@]}" "$pin" >>"$DIR/log/cluster-python.log" 2>&1 \
    || { tail -n 20 "$DIR/log/cluster-python.log" >&2; die "install failed (jupyter-server)"; }
fi
chmod -R a+rX "$venv"

# A login shell (`bash -lc`, as hpcjax runs every command there) reads ~/.profile.
cat >"$home/.profile" <<PROFILE
# written by hpcjax's slurm/devcluster/cluster-user.sh
# In a release's root (root-user.sh), its own Python and SLURM come first: /etc/profile said them.
if [ -z "\${HPCJAX_CLUSTER_ROOT:-}" ]; then
  export PATH="$venv/bin:\$PATH"
  export SLURM_CONF="$DIR/etc/slurm.conf"
fi
# The tests' login without SLURM (tests/sshd.py sends it; their sshd alone accepts it).
if [ -n "\${HPCJAX_TEST_LOGIN_PATH:-}" ]; then PATH=\$HPCJAX_TEST_LOGIN_PATH; fi
PROFILE
install -d -m 700 -o "$user" -g "$user" "$home/.ssh"
chown "$user:" "$home/.profile"
echo "$user"
