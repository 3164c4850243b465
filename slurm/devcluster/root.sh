#!/usr/bin/env bash
# Make the Debian root a SLURM release runs in (releases.sh says which), with mmdebstrap from the
# machine's Debian mirror: that release's slurmctld, slurmd, slurmdbd, client commands and munge,
# and the shared libraries this machine's Python needs (the jobs' ranks run it, through a bind
# mount at the same path: the same hpcjax and JAX on every release). Idempotent: a root whose
# packages are in place is left as it is. Prints the root's path. Needs root.
#
#   root.sh RELEASE      (20.11, 24.11, 26.05 or strict; 22.05 is this machine's own, no root)
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=common.sh
source "$here/common.sh"
# shellcheck source-path=SCRIPTDIR source=releases.sh
source "$here/releases.sh"
release=${1:?usage: root.sh RELEASE}
release_row "$release"
[[ -n $SUITE ]] || die "release $release is this machine's own: it needs no root"
[[ $(id -u) == 0 ]] || die "root.sh must run as root (mmdebstrap, chroot)"
root=$(root_of "$SLURM_SUITE")
SLURM_PACKAGES=(slurmctld slurmd slurmdbd slurm-client munge)
# What this machine's Python (and the ranks' JAX, and hpcjax's rank side) loads from the system, by
# each Debian release's package names; and what a job's shell and hpcjax call (hostname, ps).
case $SUITE in
  bookworm) LIBS=(libffi8 libssl3 libsqlite3-0 libbz2-1.0 liblzma5 zlib1g libreadline8 libncursesw6 libuuid1) ;;
  *) LIBS=(libffi8 libssl3t64 libsqlite3-0 libbz2-1.0 liblzma5 zlib1g libreadline8t64 libncursesw6 libuuid1) ;;
esac
TOOLS=(hostname procps ca-certificates)

# The mirror this machine's apt uses (its sources name it); Debian's own otherwise.
mirror() {
  local uri
  uri=$(grep -rhoE '^(URIs:|deb) *(\[[^]]*\] *)?https?://[^ ]*/debian/?( |$)' /etc/apt/sources.list /etc/apt/sources.list.d 2>/dev/null \
        | grep -oE 'https?://[^ ]*' | head -n 1 || true)
  echo "${uri:-http://deb.debian.org/debian}"
}

complete() {  # the root has every package, and SLURM's version is the release's
  local version
  [[ -x $root/usr/sbin/slurmctld && -x $root/usr/sbin/slurmdbd && -x $root/usr/bin/sbatch ]] || return 1
  version=$(version_in "$root") || return 1
  [[ $version == "$SLURM_VERSION."* ]]
}

# shellcheck disable=SC2016 # dpkg-query's own format
version_in() { chroot "$1" dpkg-query -W -f '${Version}' slurmctld 2>/dev/null; }

if complete; then echo "$root"; exit 0; fi
mkdir -p "$(dirname "$root")" "$DIR/log"
# One build of a root at a time (24.11 and strict share trixie's, and start side by side): the second
# waits here and finds it made.
exec 9>"$root.lock"
flock 9
if complete; then echo "$root"; exit 0; fi
build="$root.partial"
rm -rf "$build"
log_file="$DIR/log/root-$SLURM_SUITE.log"
log "making the $SUITE root for SLURM $SLURM_VERSION at $root (mmdebstrap; log: $log_file)"
# mmdebstrap rather than debootstrap: apt and dpkg in one pass, where debootstrap's second stage
# calls dpkg package by package. Alone on this machine, the trixie root took 20.7 s and 20 CPU-s,
# against 35.0 s and 39.7 CPU-s; the test command builds three roots beside its main run, where
# every CPU-second is one the tests wait for. The package lists stay (root-user.sh installs more).
: >"$log_file"
if ! command -v mmdebstrap >/dev/null; then
  log "installing mmdebstrap (apt-get)"
  # roots of other releases may be made beside this one: the second apt-get waits for the first
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq -o DPkg::Lock::Timeout=300 mmdebstrap >>"$log_file" 2>&1 \
    || { tail -n 20 "$log_file" >&2; die "apt-get could not install mmdebstrap (log above)"; }
fi
includes=$(IFS=,; echo "${LIBS[*]},${TOOLS[*]}")
if [[ $SLURM_SUITE == "$SUITE" ]]; then includes+=",$(IFS=,; echo "${SLURM_PACKAGES[*]}")"; fi
# A mirror may serve a testing release's Release file after its Valid-Until (this machine's did: forky's
# had expired 31 days before), which apt refuses and debootstrap never checked: the root's apt, now
# and later (root-user.sh), takes it as debootstrap did.
mmdebstrap --variant=minbase --skip=cleanup/apt/lists --aptopt='Acquire::Check-Valid-Until "false"' \
  --include="$includes" "$SUITE" "$build" "$(mirror)" \
  >>"$log_file" 2>&1 || { tail -n 20 "$log_file" >&2; die "mmdebstrap of $SUITE failed (log above)"; }
# No package in the root may start a service (up.sh starts every daemon itself).
printf '#!/bin/sh\nexit 101\n' >"$build/usr/sbin/policy-rc.d" && chmod +x "$build/usr/sbin/policy-rc.d"
if [[ $SLURM_SUITE != "$SUITE" ]]; then
  # SLURM from an older Debian release: its binaries and the libraries only it has (libslurm and
  # friends), beside the root's newer glibc, which runs them as it runs its own.
  echo "deb $(mirror) $SLURM_SUITE main" >"$build/etc/apt/sources.list.d/$SLURM_SUITE.list"
  { chroot "$build" apt-get update -qq &&
    DEBIAN_FRONTEND=noninteractive chroot "$build" apt-get install -y -qq --no-install-recommends \
      -t "$SLURM_SUITE" "${SLURM_PACKAGES[@]}"; } >>"$log_file" 2>&1 \
    || { tail -n 20 "$log_file" >&2; die "SLURM from $SLURM_SUITE would not install in the $SUITE root (log above)"; }
fi
chroot "$build" apt-get clean >/dev/null 2>&1 || true
rm -rf "$root" && mv "$build" "$root"
complete || die "the root at $root has no SLURM $SLURM_VERSION (log: $log_file)"
log "the $SUITE root is ready: SLURM $(version_in "$root")"
echo "$root"
