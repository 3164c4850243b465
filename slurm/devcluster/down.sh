#!/usr/bin/env bash
# Stop what up.sh started, by the pids in its pid files (never by name), newest first.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=common.sh
source "$here/common.sh"

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
stop mariadbd
stop munged
