#!/usr/bin/env bash
# Start a real SLURM cluster on this machine: munge, MariaDB, slurmdbd, slurmctld
# and one slurmd per emulated node, each node with emulated GPUs (gres/gpu backed
# by character devices). Idempotent: a running cluster with the same settings is
# left as it is. Needs root on Debian 12; installs missing packages with apt-get.
#
# Settings (environment):
#   HPCJAX_DEVCLUSTER_DIR      state, logs, configuration (default /var/lib/hpcjax-devcluster)
#   HPCJAX_DEVCLUSTER_NODES    number of nodes of the default partition gpu (default 2: node1, node2);
#                              one more, the typed node (node3), is the partition a100 (configs.sh)
#   HPCJAX_DEVCLUSTER_GPUS     emulated GPUs per node (default 4)
#   HPCJAX_DEVCLUSTER_CPUS     CPUs per node (default 8; may exceed the machine's)
#   HPCJAX_DEVCLUSTER_APT_ALSO Debian packages the caller also needs, installed by the same
#                              apt-get run (scripts/test.sh's: one apt-get update, not two)
#
# Clients find the cluster through /etc/slurm/slurm.conf (a symlink this script
# creates only if no other configuration is there) or SLURM_CONF=$DIR/etc/slurm.conf.
#
#   up.sh [--release R]   R: 22.05 (this machine's, the default), 20.11, 24.11, 26.05 or strict
#                         (24.11 as strict sites run it); releases.sh has what each is. Every
#                         release is a cluster of its own (name, ports, munge socket, state in
#                         $DIR-R, a database in the one MariaDB), its daemons that release's own
#                         binaries in a Debian root (root.sh, enter.sh); several run side by side.
#                         slurm/devcluster/on.sh R -- CMD runs a command on it.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=common.sh
source "$here/common.sh"
# shellcheck source-path=SCRIPTDIR source=releases.sh
source "$here/releases.sh"
RELEASE=22.05
while [[ $# -gt 0 ]]; do
  case $1 in
    --release) RELEASE=${2:?up.sh: --release needs one of: ${RELEASES[*]}}; shift 2 ;;
    *) die "unknown argument '$1'; usage: up.sh [--release R] (releases: ${RELEASES[*]})" ;;
  esac
done
release_row "$RELEASE" || exit 2
RUN=()  # the prefix that runs a command where the release's binaries are: its root, or here
SHARED=""
BASE_DIR=$DIR  # the 22.05 cluster's, whose MariaDB serves every release
if [[ $RELEASE != 22.05 ]]; then
  # The one MariaDB, and the packages, come with this machine's own cluster: started first, by one
  # of several releases started at once (scripts/test.sh starts them side by side).
  mkdir -p "$DIR/run"
  # (fd 9 closed for up.sh: a daemon it starts would inherit the lock and hold it for as long as it
  # runs, and every other release's start would wait on it for ever: measured, 2026-12-06)
  ( flock 9; bash "$here/up.sh" 9>&- ) 9>"$DIR/run/up.lock"
  bash "$here/root.sh" "$RELEASE" >/dev/null
  DIR=$(state_of "$RELEASE") CLUSTER=$RELEASE_CLUSTER PORT_BASE=$RELEASE_PORT_BASE
  RUN=(bash "$here/enter.sh" "$RELEASE")
  # What the daemons' root shares that may differ between runs (enter.sh binds them at start): a
  # cluster started from another checkout or Python is restarted (write_configs sees the change); so
  # is one whose checkout was replaced at the same path (a fresh clone): the daemons' bind still held
  # the deleted one, and the ranks found no hpcjax there (measured), hence its inode.
  checkout=$(cd "$here/../.." && pwd)
  SHARED="checkout $checkout (inode $(stat -c %i "$checkout")), Python $(python3 -c 'import sys; print(sys.base_prefix)' 2>/dev/null)"
fi

NODES=${HPCJAX_DEVCLUSTER_NODES:-2}
GPUS=${HPCJAX_DEVCLUSTER_GPUS:-4}
CPUS=${HPCJAX_DEVCLUSTER_CPUS:-8}
PACKAGES=(slurm-wlm slurmdbd munge mariadb-server)
ALL_NODES=$((NODES + 1))  # and the typed node
TYPED_GPUS=2

for value in "$NODES" "$GPUS" "$CPUS"; do
  [[ $value =~ ^[1-9][0-9]*$ ]] || die "node, GPU and CPU counts must be positive integers, got '$value'"
done
[[ $(id -u) == 0 ]] || die "up.sh must run as root (it starts system daemons)"

install_packages() {
  local missing=() also=() policy=/usr/sbin/policy-rc.d made_policy=""
  for pkg in "${PACKAGES[@]}" ; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
  done
  read -r -a also <<<"${HPCJAX_DEVCLUSTER_APT_ALSO:-}"
  missing+=("${also[@]}")
  [[ ${#missing[@]} == 0 ]] && return
  log "installing ${missing[*]} (apt-get)"
  export DEBIAN_FRONTEND=noninteractive
  # No package may start a service of its own (this script starts the daemons, with their own
  # files and ports; Debian's openssh-server would start a system sshd on port 22): a
  # policy-rc.d says no to each, unless the machine has one.
  if [[ ! -e $policy ]]; then printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod +x "$policy" && made_policy=1; fi
  apt-get update -qq >"$DIR/log/apt.log" 2>&1 || apt_failed "${made_policy:+$policy}"
  apt-get install -y -qq "${missing[@]}" >>"$DIR/log/apt.log" 2>&1 || apt_failed "${made_policy:+$policy}"
  if [[ -n $made_policy ]]; then rm -f "$policy"; fi
}

apt_failed() {  # $1: the policy-rc.d this script made, to take away again
  if [[ -n ${1:-} ]]; then rm -f "$1"; fi
  tail -n 20 "$DIR/log/apt.log" >&2
  die "apt-get failed (log above, full log in $DIR/log/apt.log)"
}

write_configs() {
  local tmp="$DIR/etc/.new" host
  host=$(hostname -s)
  mkdir -p "$tmp"
  NODES=$NODES GPUS=$GPUS CPUS=$CPUS HOST=$host DIR=$DIR PORT_BASE=$PORT_BASE CLUSTER=$CLUSTER \
    RELEASE=$SLURM_VERSION DB_PORT=$((${HPCJAX_DEVCLUSTER_PORT_BASE:-7800} + 3)) STRICT=$STRICT SHARED=$SHARED \
    bash "$here/configs.sh" "$tmp"
  if [[ -f $DIR/etc/slurm.conf ]] && ! diff -q "$tmp/slurm.conf" "$DIR/etc/slurm.conf" >/dev/null; then
    log "settings changed: restarting the cluster"
    bash "$here/down.sh" --release "$RELEASE"
  fi
  rm -f "$DIR/etc/cgroup.conf" "$DIR/etc/job_submit.lua"  # only where this release's settings write them
  cp "$tmp"/* "$DIR/etc/"
  chmod 600 "$DIR/etc/slurmdbd.conf"
  rm -rf "$tmp"
}

make_gpu_devices() {
  local node gpu
  for node in $(seq 1 "$ALL_NODES"); do
    mkdir -p "$DIR/dev/node$node"
    for gpu in $(seq 0 $(( (node > NODES ? TYPED_GPUS : GPUS) - 1))); do
      # A character device like /dev/nvidiaN; slurmd only needs it to exist.
      [[ -c $DIR/dev/node$node/nvidia$gpu ]] || mknod "$DIR/dev/node$node/nvidia$gpu" c 1 3
    done
  done
}

add_hosts() {
  # Node names must resolve: JAX's coordinator address is a node's hostname.
  local names="" node
  for node in $(seq 1 "$ALL_NODES"); do
    grep -qE "^[^#]*[[:space:]]node$node([[:space:]]|$)" /etc/hosts || names+=" node$node"
  done
  [[ -z $names ]] || echo "127.0.0.1$names # hpcjax-devcluster" >>/etc/hosts
}

link_system_config() {
  local system=/etc/slurm/slurm.conf
  mkdir -p /etc/slurm
  if [[ -L $system && $(readlink "$system") == "$DIR/etc/slurm.conf" ]]; then return; fi
  if [[ -e $system || -L $system ]]; then
    log "leaving $system alone (not ours); use: export SLURM_CONF=$DIR/etc/slurm.conf"
    return
  fi
  ln -s "$DIR/etc/slurm.conf" "$system"
}

start_munge() {
  running munged && return
  # The socket's directory must be reachable by all; the key's readable by munge only.
  mkdir -p "$DIR/munge/key"
  if [[ ! -f $DIR/munge/key/munge.key ]]; then
    dd if=/dev/urandom of="$DIR/munge/key/munge.key" bs=1024 count=1 status=none
  fi
  "${RUN[@]}" chown -R munge:munge "$DIR/munge"  # the root's munge user, in a root
  chmod 755 "$DIR/munge"
  chmod 700 "$DIR/munge/key"
  chmod 400 "$DIR/munge/key/munge.key"
  "${RUN[@]}" runuser -u munge -- /usr/sbin/munged --key-file="$DIR/munge/key/munge.key" \
    --socket="$DIR/munge/munge.socket" --pid-file="$(pidfile_of munged)" \
    --log-file="$(logfile_of munged)" --seed-file="$DIR/munge/munged.seed" \
    || fail_with_log munged
}

start_mariadb() {
  if [[ $RELEASE != 22.05 ]]; then grant_database; return; fi
  running mariadbd && return
  local data="$DIR/mysql/data"
  mkdir -p "$DIR/mysql"
  chown mysql:mysql "$DIR/mysql"
  if [[ ! -d $data/mysql ]]; then
    mariadb-install-db --no-defaults --user=mysql --datadir="$data" \
      --auth-root-authentication-method=socket >"$DIR/log/mariadb-install.log" 2>&1 \
      || { tail_log "$DIR/log/mariadb-install.log"; die "mariadb-install-db failed"; }
  fi
  setsid /usr/sbin/mariadbd --no-defaults --user=mysql --datadir="$data" \
    --socket="$DIR/mysql/mysqld.sock" --bind-address=127.0.0.1 --port="$((PORT_BASE + 3))" \
    --pid-file="$(pidfile_of mariadbd)" --log-error="$(logfile_of mariadbd)" \
    </dev/null >/dev/null 2>&1 &
  wait_for "MariaDB" 30 mariadb --no-defaults --socket="$DIR/mysql/mysqld.sock" -u root -e "SELECT 1" \
    || fail_with_log mariadbd
  mariadb --no-defaults --socket="$DIR/mysql/mysqld.sock" -u root <<SQL
CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY 'slurmdev';
CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY 'slurmdev';
GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';
GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost';
SQL
}

# A release's own database in the one MariaDB (slurmdbd makes its tables).
grant_database() {
  mariadb --no-defaults --socket="$BASE_DIR/mysql/mysqld.sock" -u root <<SQL
GRANT ALL ON \`slurm_acct_db_$CLUSTER\`.* TO 'slurm'@'127.0.0.1';
GRANT ALL ON \`slurm_acct_db_$CLUSTER\`.* TO 'slurm'@'localhost';
SQL
}

start_slurmdbd() {
  running slurmdbd && return
  # slurmdbd reads slurmdbd.conf beside the slurm.conf that SLURM_CONF names.
  SLURM_CONF="$DIR/etc/slurm.conf" "${RUN[@]}" /usr/sbin/slurmdbd || fail_with_log slurmdbd
  wait_for "slurmdbd" 30 "${RUN[@]}" sacctmgr -n list cluster || fail_with_log slurmdbd
  if ! "${RUN[@]}" sacctmgr -n -P list cluster format=cluster | grep -qx "$CLUSTER"; then
    "${RUN[@]}" sacctmgr -i add cluster "$CLUSTER" >/dev/null
  fi
}

# After slurmctld: a fresh database knows the TRES gres/gpu only once slurmctld has registered its
# AccountingStorageTRES, and until then sacctmgr refuses a QOS limit on it ("no TRES known by type
# gres/gpu"; met on a bare machine, where no earlier run had filled the database).
add_qos_and_account() {
  wait_for "slurmdbd (the TRES gres/gpu, which slurmctld registers)" 30 gpu_tres_known || fail_with_log slurmctld
  # A QOS with a GPU limit, and a second account whose association may use it, as a site has them:
  # hpcjax reads them (site, and the refusal of a job over the limit before sbatch). SLURM does not
  # enforce them here (no AccountingStorageEnforce: every user may run without an association).
  if ! "${RUN[@]}" sacctmgr -n -P show qos format=name | grep -qx gpu2; then
    "${RUN[@]}" sacctmgr -i add qos gpu2 MaxTRESPerUser=gres/gpu=2 MaxWall=02:00:00 >/dev/null
  fi
  if ! "${RUN[@]}" sacctmgr -n -P show account format=account | grep -qx physics; then
    "${RUN[@]}" sacctmgr -i add account physics Cluster="$CLUSTER" Description=hpcjax-dev Organization=hpcjax >/dev/null
    "${RUN[@]}" sacctmgr -i add user root Account=physics Cluster="$CLUSTER" >/dev/null
    "${RUN[@]}" sacctmgr -i modify user root where account=physics set QOS=normal,gpu2 >/dev/null
  fi
  if [[ -n $STRICT ]]; then add_strict_associations; fi
}

# The strict site's users exist for SLURM only as associations: root may run in the account physics
# (its default) with the QOS normal (its default) and gpu2; the account chemistry has no user of
# ours, and the cluster user none at all (SLURM refuses their jobs).
add_strict_associations() {
  if ! "${RUN[@]}" sacctmgr -n -P show account format=account | grep -qx chemistry; then
    "${RUN[@]}" sacctmgr -i add account chemistry Cluster="$CLUSTER" Description=hpcjax-dev Organization=hpcjax >/dev/null
  fi
  "${RUN[@]}" sacctmgr -i modify user root where cluster="$CLUSTER" set DefaultAccount=physics DefaultQOS=normal >/dev/null || true
  "${RUN[@]}" sacctmgr -i modify qos normal set MaxWall=04:00:00 >/dev/null || true
}

gpu_tres_known() {
  "${RUN[@]}" sacctmgr -n -P show tres format=type,name | grep -qx 'gres|gpu'
}

start_slurmctld() {
  running slurmctld && return
  "${RUN[@]}" /usr/sbin/slurmctld -f "$DIR/etc/slurm.conf" || fail_with_log slurmctld
  wait_for "slurmctld" 30 "${RUN[@]}" scontrol ping || fail_with_log slurmctld
  # Jobs the saved state still calls running died with the previous daemons (a
  # machine that stopped): cancel them, or their nodes never become idle.
  local stale
  stale=$("${RUN[@]}" squeue -h -o %i | tr '\n' ' ')
  if [[ -n ${stale// /} ]]; then
    log "cancelling jobs left over from a previous start: $stale"
    # shellcheck disable=SC2086 # one job id per word
    "${RUN[@]}" scancel $stale
  fi
}

start_slurmd() {
  local node
  for node in $(seq 1 "$ALL_NODES"); do
    running "slurmd.node$node" && continue
    "${RUN[@]}" /usr/sbin/slurmd -f "$DIR/etc/slurm.conf" -N "node$node" \
      || fail_with_log "slurmd.node$node"
  done
}

# A test that slows a node puts its slurmd in a CPU cgroup with a quota and undoes it when it ends
# (tests/launch/test_preflight_cluster.py); a run killed in between leaves the node slow for every
# later job. Bring such a node back before anything runs.
release_slowed_nodes() {
  local group task
  for group in /sys/fs/cgroup/cpu/hpcjax-test-slow-* /sys/fs/cgroup/hpcjax-test-slow-*; do
    [[ -d $group ]] || continue
    for task in $(cat "$group/cgroup.procs" 2>/dev/null); do
      echo "$task" >"$(dirname "$group")/cgroup.procs" 2>/dev/null || true
    done
    rmdir "$group" 2>/dev/null && log "released $(basename "$group"), left by an interrupted test run"
  done
  return 0
}

wait_until_idle() {
  local deadline=$((SECONDS + 60)) states
  while ((SECONDS < deadline)); do
    states=$("${RUN[@]}" sinfo -h -N -o '%t' 2>/dev/null | sort -u | tr '\n' ' ')
    [[ $states == "idle " ]] && [[ $("${RUN[@]}" sinfo -h -N -o '%N' | sort -u | wc -l) == "$ALL_NODES" ]] && return
    sleep 0.5
  done
  "${RUN[@]}" sinfo -N >&2 || true
  for node in $(seq 1 "$ALL_NODES"); do tail_log "$DIR/log/slurmd.node$node.log"; done
  tail_log "$DIR/log/slurmctld.log"
  die "nodes did not become idle within 60 s (states: ${states:-none})"
}

mkdir -p "$DIR"/{etc,log,run,state,spool}
if [[ $RELEASE == 22.05 ]]; then install_packages; fi
write_configs
export SLURM_CONF="$DIR/etc/slurm.conf"
make_gpu_devices
if [[ $RELEASE == 22.05 ]]; then add_hosts; link_system_config; fi
start_munge
start_mariadb
start_slurmdbd
start_slurmctld
add_qos_and_account
start_slurmd
if [[ $RELEASE == 22.05 ]]; then release_slowed_nodes; fi
wait_until_idle
log "cluster '$CLUSTER' (SLURM $SLURM_VERSION) is up: $NODES nodes x $GPUS GPUs x $CPUS CPUs, and node$ALL_NODES with $TYPED_GPUS a100 GPUs (SLURM_CONF=$SLURM_CONF)"
"${RUN[@]}" sinfo -N -o '%N %P %t %c %G' >&2
