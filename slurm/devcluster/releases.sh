# The SLURM releases the dev cluster runs, one row each: which Debian root holds that release's
# own binaries, where its packages come from, its ports and its cluster's name. The one owner of
# these facts; up.sh, on.sh, root.sh and down.sh read them through release_row.
# shellcheck shell=bash
# shellcheck disable=SC2034 # the variables are the sourcing scripts'
#
# 22.05 is this machine's own (Debian 12's packages, no root). The others run in a root made by
# mmdebstrap (root.sh), each entered through a mount namespace of its own (enter.sh):
#   20.11  Debian 11's packages in a Debian 12 root: the jobs run this machine's Python, which
#          needs glibc 2.34 (Debian 11 has 2.31); SLURM 20.11's binaries run on the newer glibc
#   24.11  Debian 13 (trixie)
#   26.05  Debian's testing release (forky)
# Ports: base+0 slurmctld, +1 slurmd default, +2 slurmdbd, +100.. one per slurmd, all below the
# coordinator ports hpcjax derives (10000 up) and clear of each other's and of 22.05's 7800..7903.
# "strict" is 24.11 again, in the same root, configured as strict sites are (configs.sh): its
# own cluster, ports, state and munge socket.
RELEASES=(20.11 22.05 24.11 26.05 strict)

# release_row KEY: sets SUITE (the root's Debian release; "" for this machine), SLURM_SUITE (where
# the SLURM packages come from), RELEASE_PORT_BASE, RELEASE_CLUSTER,
# SLURM_VERSION (the release's first two numbers) and STRICT (1 for the strict site).
release_row() {
  STRICT=""
  case $1 in
    20.11) SUITE=bookworm SLURM_SUITE=bullseye RELEASE_PORT_BASE=8000 RELEASE_CLUSTER=hpcjax2011 ;;
    22.05) SUITE="" SLURM_SUITE=bookworm RELEASE_PORT_BASE=7800 RELEASE_CLUSTER=hpcjaxdev ;;
    24.11) SUITE=trixie SLURM_SUITE=trixie RELEASE_PORT_BASE=8200 RELEASE_CLUSTER=hpcjax2411 ;;
    26.05) SUITE=forky SLURM_SUITE=forky RELEASE_PORT_BASE=8400 RELEASE_CLUSTER=hpcjax2605 ;;
    strict) SUITE=trixie SLURM_SUITE=trixie RELEASE_PORT_BASE=8600 RELEASE_CLUSTER=hpcjaxstrict STRICT=1 ;;
    *) echo "devcluster: error: no release '$1'; the releases: ${RELEASES[*]}" >&2; return 2 ;;
  esac
  SLURM_VERSION=$1
  [[ $1 != strict ]] || SLURM_VERSION=24.11
}

# Where a release's root lives (one per Debian release: 24.11 and strict share trixie's).
root_of() { echo "${HPCJAX_DEVCLUSTER_ROOTS:-/var/lib/hpcjax-roots}/$1"; }
# Where a release's cluster keeps its state, logs and configuration (22.05: the dev cluster's).
state_of() {
  if [[ $1 == 22.05 ]]; then echo "${HPCJAX_DEVCLUSTER_DIR:-/var/lib/hpcjax-devcluster}"
  else echo "${HPCJAX_DEVCLUSTER_DIR:-/var/lib/hpcjax-devcluster}-$1"; fi
}
