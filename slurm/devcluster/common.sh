# Shared by up.sh and down.sh: where things live and small helpers.
# shellcheck shell=bash
DIR=${HPCJAX_DEVCLUSTER_DIR:-/var/lib/hpcjax-devcluster}
# shellcheck disable=SC2034 # used by the scripts that source this file
CLUSTER=hpcjaxdev
# Ports of our own, far from the defaults, so a site's SLURM is never touched:
# +0 slurmctld, +1 slurmd default, +2 slurmdbd, +3 MariaDB, +100.. one per slurmd.
# Below 10000: the coordinator ports hpcjax derives from job ids (contract.PORT_BASE
# upwards) must never meet a daemon's (job 425 once drew slurmctld's 16800).
# shellcheck disable=SC2034
PORT_BASE=${HPCJAX_DEVCLUSTER_PORT_BASE:-7800}

log() { echo "devcluster: $*" >&2; }
die() { echo "devcluster: error: $*" >&2; exit 1; }

# Where each daemon's pid file is; daemons that drop root write inside their own dir.
pidfile_of() {
  case $1 in
    munged) echo "$DIR/munge/munged.pid" ;;
    mariadbd) echo "$DIR/mysql/mariadbd.pid" ;;
    *) echo "$DIR/run/$1.pid" ;;
  esac
}

logfile_of() {
  case $1 in
    munged) echo "$DIR/munge/munged.log" ;;
    mariadbd) echo "$DIR/mysql/mariadb.log" ;;
    *) echo "$DIR/log/$1.log" ;;
  esac
}

# The pid in NAME's pid file, if that process is alive and is that daemon (a pid
# file left by a machine that stopped may name a pid reused by something else).
live_pid() {
  local file pid daemon=${1%%.*}
  file=$(pidfile_of "$1")
  [[ -s $file ]] || return 1
  pid=$(tr -dc '0-9' <"$file")
  [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null || return 1
  [[ $(cat "/proc/$pid/comm" 2>/dev/null) == "$daemon" ]] || return 1
  [[ $(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null) != Z ]] || return 1  # a zombie is dead
  echo "$pid"
}

running() { live_pid "$1" >/dev/null; }

tail_log() {
  [[ -f $1 ]] || return 0
  echo "--- last lines of $1:" >&2
  tail -n 25 "$1" >&2
}

fail_with_log() {
  tail_log "$(logfile_of "$1")"
  die "$1 did not start (log above)"
}

# wait_for WHAT SECONDS CMD...: retry CMD until it succeeds or time runs out.
wait_for() {
  local what=$1 limit=$2 deadline
  shift 2
  deadline=$((SECONDS + limit))
  until "$@" >/dev/null 2>&1; do
    ((SECONDS < deadline)) || { log "$what did not answer within ${limit} s"; return 1; }
    sleep 0.3
  done
}
