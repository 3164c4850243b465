#!/usr/bin/env bash
# Run a command on a release's dev cluster, as on its login node: that release's client commands
# (sbatch, srun, squeue, sacct, scontrol, sinfo, sacctmgr: the root's /usr/bin) and its SLURM_CONF,
# in its root (enter.sh) for every release but this machine's own 22.05.
#
#   on.sh RELEASE [--user NAME] -- CMD...
#   on.sh 24.11 -- sinfo
#   on.sh 26.05 -- python3 -m hpcjax smoke --nodes 2 --gpus-per-node 4
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=common.sh
source "$here/common.sh"
# shellcheck source-path=SCRIPTDIR source=releases.sh
source "$here/releases.sh"
usage="usage: on.sh RELEASE [--user NAME] -- CMD... (releases: ${RELEASES[*]})"
release=${1:?$usage}
shift
release_row "$release" || exit 2
user=""
while [[ $# -gt 0 && $1 != -- ]]; do
  case $1 in
    --user) user=${2:?$usage}; shift 2 ;;
    *) die "$usage" ;;
  esac
done
[[ ${1:-} == -- ]] && shift
[[ $# -gt 0 ]] || die "$usage"
conf="$(state_of "$release")/etc/slurm.conf"
[[ -f $conf ]] || die "the $release cluster has no configuration at $conf: start it with slurm/devcluster/up.sh --release $release"
export SLURM_CONF=$conf
if [[ -n $user ]]; then
  exec bash "$here/enter.sh" "$release" runuser -u "$user" -- env "SLURM_CONF=$SLURM_CONF" "$@"
fi
exec bash "$here/enter.sh" "$release" "$@"
