#!/usr/bin/env bash
# The whole test suite, from a fresh clone on a fresh Debian 12 machine (as root):
# installs what the tests need, starts the dev SLURM cluster, runs pytest.
# Extra arguments go to pytest (e.g. -k render). The cluster stays up afterwards
# for the next run; stop it with slurm/devcluster/down.sh.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# hpcjax and its dependencies in the background, beside apt-get and the cluster's start (neither
# needs them), by uv, which pip installs (one wheel): uv downloads and unpacks in parallel, where
# pip goes one package at a time (a bare machine: pip took 69 s, the critical path before the
# first tier, with apt-get and the cluster's start done in 38). It compiles the bytecode as pip
# does (else each process compiles what it imports, where it may not write). Its output is shown
# if it fails. The editable install is a plain path in a .pth file (setuptools' compat mode), not
# the import hook it makes by default: every Python the suite starts (about 3,000 CLI calls and
# ranks) looked hpcjax up through that hook, and `python -m hpcjax --help` took 109 ms, 85 ms without.
# pytest keeps each test module's rewritten asserts in __pycache__ unless bytecode writing is off
# (PYTHONDONTWRITEBYTECODE, set on some machines): then every worker of every tier rewrites all
# of them again (about 1.5 s of CPU each here).
unset PYTHONDONTWRITEBYTECODE
install_log=$(mktemp /tmp/hpcjax-install.XXXXXX)
echo "test.sh: installing hpcjax and its dependencies (uv, in the background)" >&2
# Once installed, still beside the cluster's start: hpcjax compiled once for every `python -m hpcjax`
# the tests start (with PYTHONDONTWRITEBYTECODE set, each would compile the package again), and the
# test modules' rewritten asserts written once by a collection (on a fresh clone each worker of the
# first tier rewrote them all, at once: 2.8 CPU-s each here), and matplotlib's font cache built once
# (on a bare machine each of the first tier's workers that plots built it; the tier took 37.2 s on one
# bare run without this, 30.4 s and 39.7 s on two with it: its time varies more than this saves);
# any of them failing only costs that time.
{ python3 -m pip install -q --disable-pip-version-check --root-user-action=ignore uv &&
  python3 -m uv pip install -q --compile-bytecode --python "$(python3 -c "import sys; print(sys.executable)")" \
    --config-settings editable_mode=compat -e ".[test,docs]" &&
  { python3 -m compileall -q hpcjax >/dev/null; python3 -m pytest -q --collect-only -p no:cacheprovider >/dev/null || true
    python3 -c "import matplotlib.font_manager" >/dev/null 2>&1 || true; }
} >"$install_log" 2>&1 &
install_pid=$!
# Shellcheck lints every rendered script; Charliecloud (ch-run) runs the container tests
# for real in an image mmdebstrap makes (Apptainer is not installable here); headless
# Chromium loads the run report. They go to the dev cluster's start, which installs them with
# its own packages in one apt-get run (and lets no package start a service: Debian's
# openssh-server would start a system sshd on port 22).
missing=()
command -v shellcheck >/dev/null || missing+=(shellcheck)
command -v ch-run >/dev/null || missing+=(charliecloud-runtime)
command -v mmdebstrap >/dev/null || missing+=(mmdebstrap)  # the image and the releases' roots
command -v chromium >/dev/null || missing+=(chromium)  # loads `hpcjax report` pages headless
# The tests' own sshd (127.0.0.1 only, started and stopped by tests/sshd.py) and rsync: the
# laptop-to-cluster tests.
[ -x /usr/sbin/sshd ] || missing+=(openssh-server)
command -v rsync >/dev/null || missing+=(rsync)
command -v tmux >/dev/null || missing+=(tmux)  # drives `hpcjax shell --on NAME` as a terminal would
HPCJAX_DEVCLUSTER_APT_ALSO="${missing[*]}" bash slurm/devcluster/up.sh
if ! wait "$install_pid"; then
  grep -v "^WARNING: " "$install_log" >&2 || true
  echo "test.sh: uv could not install hpcjax and its dependencies (above)" >&2
  exit 1
fi
rm -f "$install_log"
# pyenv only sees a new console script after a rehash.
if command -v pyenv >/dev/null; then pyenv rehash; fi
export SLURM_CONF=${SLURM_CONF:-${HPCJAX_DEVCLUSTER_DIR:-/var/lib/hpcjax-devcluster}/etc/slurm.conf}
# The cheap tier first (Python alone, under a minute), so that a failure there shows at once; then
# the rest on three workers, so at most three tests that compute share the dev cluster (four were
# tried: faster, but two cores then starve JAX's start-up into aborts; tests/conftest.py says
# more), and beside them the lane of tests that mostly wait (below), the seam
# matrix's cells in three groups and a few tests that share a fixture or must take turns in
# groups of their own (--dist loadgroup: xdist_group marks); then the few tests that need an
# idle machine or the whole cluster, alone. Each run ends with its tiers' test time against
# tests/budgets.toml. Every part runs, whatever the one before said; the status is the worst.
# Every test's phases with their start and end (tests/conftest.py), one JSON line each: which
# worker ran what when, kept beside the clone for the next person who makes the suite faster.
export HPCJAX_TEST_TIMELINE=${HPCJAX_TEST_TIMELINE:-$PWD/test-timeline.jsonl}
# One JAX compilation cache for all of this run's tiers (tests/conftest.py, shared_compile_cache, keeps
# one per pytest session otherwise): the waits lane and the serial tier compile programs the main run
# has compiled. Fresh per run: no run starts from an earlier run's cache.
if [ -z "${HPCJAX_COMPILE_CACHE:-}" ]; then
  HPCJAX_COMPILE_CACHE=$(mktemp -d /tmp/hpcjax-compile-cache.XXXXXX)
  cache_made=$HPCJAX_COMPILE_CACHE
  export HPCJAX_COMPILE_CACHE
fi
rm -f "$HPCJAX_TEST_TIMELINE"
status=0
counted() {  # a failing run's exit status becomes the script's; 5 is none selected (e.g. with -k)
  [ "$1" -eq 0 ] || [ "$1" -eq 5 ] || status=$1
}
tier() {
  python3 -m pytest "$@" || counted $?
}
# worksteal: a worker that runs out takes tests queued on another (with xdist's default, one worker
# ran the last 6 s alone: 33 s against 31 s here); three workers on two cores: since the command
# lines are forked (tests/forkserver.py) the tier computes less and waits more (on servers, locks,
# its local jobs), and three took 27-34 s where two took 32-40 s, the same runs alternated here
tier -ra -n 3 --dist worksteal -m "pure and not serial" "$@"
# The other SLURM releases' clusters (20.11, 24.11, 26.05, and 24.11 as a strict site: slurm/devcluster/
# releases.sh), each in a Debian root mmdebstrap makes (kept between runs), started in the background
# once the pure tier has run (beside it, they doubled its 31 s): 4-5 minutes beside the main run on a
# bare machine (20-40 s each alone), 16 s when kept. The release tests wait for their cluster (tests/conftest.py, release_cluster); each
# start's log and exit status are in this folder.
if [ -z "${HPCJAX_TEST_RELEASES_START:-}" ]; then
  HPCJAX_TEST_RELEASES_START=$(mktemp -d /tmp/hpcjax-releases.XXXXXX)
  releases_made=$HPCJAX_TEST_RELEASES_START
  export HPCJAX_TEST_RELEASES_START
  echo "test.sh: the other SLURM releases' clusters, in the background (logs: $HPCJAX_TEST_RELEASES_START)" >&2
  for release in 20.11 24.11 26.05 strict; do
    ( started=0
      bash slurm/devcluster/up.sh --release "$release" >"$HPCJAX_TEST_RELEASES_START/$release.log" 2>&1 || started=$?
      # 24.11's cluster user logs in to Debian 13's own Python 3.13 (tests/releases/test_cluster_python.py)
      if [ "$release" = 24.11 ] && [ "$started" = 0 ]; then
        bash slurm/devcluster/root-user.sh 24.11 >>"$HPCJAX_TEST_RELEASES_START/$release.log" 2>&1 || started=$?
      fi
      echo "$started" >"$HPCJAX_TEST_RELEASES_START/$release.rc.partial" &&
        mv "$HPCJAX_TEST_RELEASES_START/$release.rc.partial" "$HPCJAX_TEST_RELEASES_START/$release.rc" ) &
  done
fi
# The container tests' image (JAX and NumPy without hpcjax; kept between runs) is built in the
# background, beside the main run's first minutes, not before them: 29 s alone on a bare machine
# (mmdebstrap and the wheels), ready at once when kept. The container tests wait for it
# (tests/conftest.py, charliecloud_image). Started after the pure tier, which it would slow.
if [ -z "${HPCJAX_TEST_IMAGE:-}" ]; then
  HPCJAX_TEST_IMAGE_BUILD=$(mktemp -d /tmp/hpcjax-image-build.XXXXXX)
  export HPCJAX_TEST_IMAGE_BUILD
  echo "test.sh: the container image, in the background (log: $HPCJAX_TEST_IMAGE_BUILD/log)" >&2
  ( build=$HPCJAX_TEST_IMAGE_BUILD built=0
    bash containers/charliecloud-image.sh >"$build/path" 2>"$build/log" || built=$?
    echo "$built" >"$build/rc.partial" && mv "$build/rc.partial" "$build/rc" ) &  # rc: whole, or not there
fi
# The dev cluster's second account, whose login shell has a Python with JAX (not hpcjax), in the
# background too: a venv, its packages from the installer's cache (35 s with pip), needed only by the
# laptop-to-cluster tests, whose fixture (tests/conftest.py, ssh_cluster) runs the same script
# and waits for this one (it takes a lock), then says why if it failed.
bash slurm/devcluster/cluster-user.sh >/dev/null 2>&1 &
# The tests that mostly wait (out a SLURM time limit, a hold's end, a program's sleep: marker
# waits) run one after another in a lane of their own beside the main run, not on its three
# workers: they use little CPU but held a worker for minutes each. Its report follows the main one.
lane_log=$(mktemp /tmp/hpcjax-waits.XXXXXX)
HPCJAX_TEST_LANE=waits python3 -m pytest -ra -p no:cacheprovider -m "waits and not pure and not serial" "$@" \
  >"$lane_log" 2>&1 &
lane_pid=$!
# The other releases' tests (marker releases: tests/releases, on the clusters started above) in a
# second lane, one after another: they wait for their cluster's start (4-5 minutes on a bare machine)
# and then mostly for its jobs, and on the main run's workers they held a worker each while they did
# (525 s of its test time, CI of a94ebf9).
releases_log=$(mktemp /tmp/hpcjax-releases-lane.XXXXXX)
HPCJAX_TEST_LANE=releases python3 -m pytest -ra -p no:cacheprovider -m "releases and not waits and not pure and not serial" \
  "$@" >"$releases_log" 2>&1 &
releases_pid=$!
tier -ra -n 3 --dist loadgroup --no-loadscope-reorder -m "not pure and not serial and not waits and not releases" "$@"
wait "$lane_pid" || counted $?
cat "$lane_log" && rm -f "$lane_log"
wait "$releases_pid" || counted $?
cat "$releases_log" && rm -f "$releases_log"
tier -ra -m serial "$@"
wait  # the image build and the cluster user, if a selection of tests (-k) ended before them
if [ -n "${HPCJAX_TEST_IMAGE_BUILD:-}" ]; then rm -rf "$HPCJAX_TEST_IMAGE_BUILD"; fi
if [ -n "${releases_made:-}" ]; then rm -rf "$releases_made"; fi
if [ -n "${cache_made:-}" ]; then rm -rf "$cache_made"; fi
exit "$status"
