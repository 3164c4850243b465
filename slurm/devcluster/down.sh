#!/usr/bin/env bash
# Stop what up.sh started, by the pids in its pid files (never by name), newest first.
#   down.sh [--release R]   one release's cluster (default 22.05: this machine's, with the MariaDB
#                           every release uses); --release all: every release's, then 22.05's
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=common.sh
source "$here/common.sh"
# shellcheck source-path=SCRIPTDIR source=releases.sh
source "$here/releases.sh"
release=22.05
[[ ${1:-} != --release ]] || release=${2:?down.sh: --release needs one of: ${RELEASES[*]} all}
if [[ $release == all ]]; then
  for other in "${RELEASES[@]}"; do
    [[ $other == 22.05 ]] || bash "$0" --release "$other"
  done
  release=22.05
fi
release_row "$release" || exit 2
DIR=$(state_of "$release")

stop() {
  local name=$1 pid
  pid=$(live_pid "$name") || return 0
  kill "$pid"
  for _ in $(seq 1 100); do
    kill -0 "$pid" 2>/dev/null || { log "stopped $name ($pid)"; return 0; }
    sleep 0.1
  done
  kill -9 "$pid" 2>/dev/null || true
  log "killed $name ($pid) after 10 s"
}

shopt -s nullglob
for file in "$DIR"/run/slurmd.*.pid; do
  name=$(basename "$file" .pid)
  stop "$name"
done
stop slurmctld
stop slurmdbd
if [[ $release == 22.05 ]]; then stop mariadbd; fi
stop munged
