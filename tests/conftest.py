"""Shared fixtures, helpers and the test tiers.

Tiers, by what a test needs (`-m TIER`; docs/development.md has the commands):
  pure       Python alone: no JAX, no cluster, no container (every test not marked otherwise)
  tools      programs outside Python that take seconds: shellcheck over many scripts, a real Jupyter
             server (`pytest.mark.tools`); the pure tier is the fast first answer (issue 62: within
             30 s), and these four were 18 s of its 75 s of test time
  jax        JAX on this machine (in the test, or in the processes it starts), or a build (the
             package's, and its install; the docs site's) (`pytest.mark.jax`)
  cluster    the dev cluster (slurm/devcluster/up.sh): marked by using the `slurm_cluster` fixture
  container  the Charliecloud test image: marked by using the `charliecloud_image` fixture
The project's test command starts the cluster and builds the image, so every tier runs in CI;
a cluster test fails, never skips, when the cluster is down.

Running in parallel (scripts/test.sh: `-n 3 --dist loadgroup`): three workers, so at most three
tests share the dev cluster at once; xdist hands out the tests one by one as workers free up, in
the order of jax_files_spread_out below, except the tests in an xdist group, which one worker runs
in order, the largest groups first: the seam matrix's cells in three (tests/seams/test_seam_matrix.py),
tests that share a module's fixture (tests/train), jobs that must not queue behind each other
(tests/rank/test_exitguard_cluster.py). Tests whose verdict needs an idle machine or the
whole cluster (`pytest.mark.serial`: who waits for whom, in seconds; stopping slurmdbd) are left
out of that run and run alone after it.

Tests live in folders that mirror hpcjax's rooms; helpers shared across folders are here and
in the modules beside this file (support, api/api_cases, train/straggler).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from itertools import zip_longest
from pathlib import Path

import forkserver
import pytest

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent
DATA_DIR = TESTS / "data"
STANDINS = TESTS / "standins"
# The dev cluster's nodes are one machine, shared with the other tests' jobs running at the same
# time: a node's throughput against the median there measures its neighbours. Tests whose preflight
# must pass while others run hold the ratio low (a site's knob) through --env or a profile's env;
# the slowed-node tests (tests/launch/test_preflight_cluster.py) run alone, at the default 0.5.
SHARED_MACHINE_ENV = {"HPCJAX_PREFLIGHT_RATIO": "0.1"}
SHARED_MACHINE = tuple(word for name, value in SHARED_MACHINE_ENV.items() for word in ("--env", f"{name}={value}"))
SHARED_MACHINE_PROFILE = "env = { " + ", ".join(f'{name} = "{value}"'
                                                 for name, value in SHARED_MACHINE_ENV.items()) + " }"
DEVCLUSTER_CONF = Path(os.environ.get("HPCJAX_DEVCLUSTER_DIR", "/var/lib/hpcjax-devcluster")) / "etc/slurm.conf"
TIERS = ("pure", "tools", "jax", "cluster", "container")
# Four workers were tried (2026-11-27): the main tier took 40 min instead of 46, but the two cores
# were then so loaded that a JAX process's registration with its coordinator timed out and was
# retried, and JAX aborted the job (SIGABRT) before the program ran: three it is.
# The cluster files had xdist groups here once (three, balanced by measured time). They never took
# effect: xdist reads a test's group before this file's collection hook added it (found from the
# test timeline, in which only the seam cells named a group), so every measured run ran without
# them, and they are gone.
# The session compiles with XLA's cheaper CPU backend (LLVM at optimization level 0, without
# its expensive passes), here and in every process it starts (jobs inherit the environment):
# most tests run a few steps of small programs, and compiling was most of the suite's CPU
# (measured: `hpcjax train` on 4 devices, 120 steps, compile cache off: 19.1 -> 12.0 CPU-s;
# 8 steps: 20.9 -> ~12). Losses differ from the default's in their last bits, never between
# two runs of one session. A value set before the session is kept.
FAST_COMPILE_XLA_FLAGS = "--xla_backend_optimization_level=0 --xla_llvm_disable_expensive_passes=true"
os.environ.setdefault("XLA_FLAGS", FAST_COMPILE_XLA_FLAGS)
for helpers in (TESTS, TESTS / "api", TESTS / "train", TESTS / "seams", TESTS / "releases"):  # support, api_cases, ... from any folder
    if str(helpers) not in sys.path:
        sys.path.insert(0, str(helpers))


def pytest_configure(config):
    # Started in the background by a non-interactive shell (`... &`), this process and every
    # child inherit SIGINT ignored, and the Ctrl-C tests' SIGINT would do nothing: restore it.
    import signal

    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    for tier, what in (("pure", "Python alone: no JAX, cluster or container (the default)"),
                       ("tools", "spends its time in programs outside Python (shellcheck, a Jupyter server)"),
                       ("jax", "runs JAX on this machine"), ("container", "needs the Charliecloud test image"),
                       ("serial", "measures timing on an idle machine: run alone, not beside other tests")):
        config.addinivalue_line("markers", f"{tier}: {what}")


def pytest_collection_modifyitems(config, items):
    """Mark each test with its tier: from the fixtures it uses, else its own marks, else pure."""
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        if "charliecloud_image" in fixtures:
            item.add_marker(pytest.mark.container)
        if fixtures & {"slurm_cluster", "shared_storage", "ssh_cluster", "release_cluster", "ssh_cluster_own_python"}:
            item.add_marker(pytest.mark.cluster)
        if not any(item.get_closest_marker(t) for t in TIERS[1:]):
            item.add_marker(pytest.mark.pure)
        # on the report, which reaches xdist's controller: its markers do not, and its keywords hold
        # every name of its node too (a test parametrized "jax" is no JAX test)
        item.user_properties.append(("tier", next(t for t in reversed(TIERS) if item.get_closest_marker(t))))
        if item.get_closest_marker("waits"):
            item.user_properties.append(("budget", "waits"))
        elif (group_of(item) or "").startswith(RELEASE_GROUP):
            item.add_marker(pytest.mark.releases)
            item.user_properties.append(("budget", "releases"))
    items[:] = groups_spread_out(jax_files_spread_out(items))


def tier_of(item) -> str:
    return dict(item.user_properties)["tier"]


def jax_files_spread_out(items: list) -> list:
    """The same tests in another order: each file whose tests are mostly of the jax tier (JAX
    computing on this machine's cores) placed evenly among the cluster and container tests
    (mostly waiting on SLURM), its tests kept together. xdist hands out tests in this order; in
    file order the JAX files (tests/train above all) came last, and the run's last six minutes had
    the CPU 100 % busy after twenty with it a third idle (vmstat, CI 14). A file moved takes its
    few pure tests with it; the pure tier runs alone, where the order does not matter."""
    files: dict[str, list] = {}
    for item in items:
        files.setdefault(item.nodeid.split("::")[0], []).append(item)
    # from the last file back: tests/train's files, which train models, are the heaviest, and in
    # the even spread the last place falls next to the run's end
    heavy = [tests for tests in reversed(files.values()) if sum(tier_of(t) == "jax" for t in tests) * 2 > len(tests)]
    rest = [item for tests in container_files_mid_run([tests for tests in files.values()
                                                       if not any(tests is h for h in heavy)]) for item in tests]
    # the groups are placed afterwards (groups_spread_out)
    waiting = [i for i, item in enumerate(rest)
               if tier_of(item) in ("cluster", "container") and not item.get_closest_marker("xdist_group")]
    if not heavy or not waiting:
        return items
    after: dict[int, list] = {}  # index in `rest` -> the heavy files that follow it
    for k, tests in enumerate(heavy):
        after.setdefault(waiting[(2 * k + 1) * len(waiting) // (2 * len(heavy))], []).extend(tests)
    return [item for i, ours in enumerate(rest) for item in [ours, *after.get(i, [])]]


def group_of(item) -> str | None:
    mark = item.get_closest_marker("xdist_group")
    return (mark.args[0] if mark.args else mark.kwargs.get("name")) if mark else None


# Where the groups go in the first 85 % of the run: after them, about four minutes of single tests
# balance the workers' ends.
GROUPS_SPAN = 0.85
# The xdist groups whose tests mostly wait on SLURM: the seam matrix's cells, another release's cluster.
# scripts/test.sh runs the release groups in a lane of their own (marker releases); a plain
# `pytest -n 3` still runs them on its workers, spread out as below.
RELEASE_GROUP = "release-"
WAITING_GROUPS = ("cluster-", RELEASE_GROUP)


def groups_spread_out(items: list) -> list:
    """The same tests with each xdist group (one worker runs it, in order) placed evenly over the
    first GROUPS_SPAN of the run instead of all at its start. With xdist's own order
    (--loadscope-reorder: the largest groups first) the three seam groups and the release groups,
    which mostly wait on SLURM (requeues, hang watches, other releases' clusters), held all three
    workers for the run's first seven minutes with the CPU 20-50 % idle (vmstat, CI 13). Placed by
    size alone (CI 16), four waiting groups still fell in the run's first fifth, and the CPU sat 60-95 %
    idle whenever three waited at once. So the waiting groups (WAITING_GROUPS) alternate, a seam group,
    then a release group, the largest first, and every third place is a group that computes or holds
    the whole cluster (the pipelines' reference, the training strategies, the exit guard's ten
    jobs): at most one or two wait at a time, beside tests that compute. The test command runs the
    main tier with --no-loadscope-reorder, so that xdist hands out work in this order."""
    units: dict[str, list] = {}
    for item in items:
        if group_of(item) is not None:
            units.setdefault(group_of(item), []).append(item)
    rest = [item for item in items if group_of(item) is None]
    if not units or not rest:
        return items
    by_size = sorted(units, key=lambda name: len(units[name]), reverse=True)
    seams = [name for name in by_size if name.startswith(WAITING_GROUPS[0])]
    releases = [name for name in by_size if name.startswith(WAITING_GROUPS[1])]
    others = [name for name in by_size if name not in seams and name not in releases]
    waiting = [name for pair in zip_longest(seams, releases) for name in pair if name]
    ordered = []
    for k, name in enumerate(waiting):
        ordered.append(name)
        if k % 2 == 1 and others:
            ordered.append(others.pop(0))
    ordered += others
    at: dict[int, list] = {}  # index in `rest` -> the groups placed before it
    for k, name in enumerate(ordered):
        at.setdefault(int((k + 0.5) / len(ordered) * GROUPS_SPAN * len(rest)), []).extend(units[name])
    return [item for i, single in enumerate(rest) for item in [*at.get(i, []), single]]


def container_files_mid_run(files: list[list]) -> list[list]:
    """The files mostly of the container tier moved to the middle of the others. The test command
    builds the image beside the main run's first minutes, slowed by it (8 minutes in CI 21, on a
    bare machine); in file order tests/containers came five minutes in, and all three workers
    waited for the image at once, two minutes each."""
    boxed = [tests for tests in files if sum(tier_of(t) == "container" for t in tests) * 2 > len(tests)]
    plain = [tests for tests in files if not any(tests is b for b in boxed)]
    return plain[:len(plain) // 2] + boxed + plain[len(plain) // 2:]


SPENT: dict[str, float] = {}  # seconds of test time per tier, this session (the controller's count)
TOOK: dict[tuple[str, str], float] = {}  # (tier, test) -> seconds, for the slowest of each tier


def pytest_runtest_logreport(report):
    """Each test's time is counted to its budget, its tier's or the waits lane's (pytest_terminal_summary).
    HPCJAX_TEST_TIMELINE=FILE: one JSON line per test phase (worker, test, phase, start, stop),
    to see which worker ran what when (how the groups below balance); a run outside xdist is
    "main", or the lane scripts/test.sh names in HPCJAX_TEST_LANE."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        properties = dict(report.user_properties)
        tier = properties.get("budget", properties.get("tier", "pure"))
        SPENT[tier] = SPENT.get(tier, 0.0) + report.duration
        TOOK[tier, report.nodeid] = TOOK.get((tier, report.nodeid), 0.0) + report.duration
    timeline = os.environ.get("HPCJAX_TEST_TIMELINE")
    if timeline and not os.environ.get("PYTEST_XDIST_WORKER"):  # written once, by the controller
        import json

        node = getattr(report, "node", None)  # the xdist worker it came from
        worker = node.gateway.id if node is not None else os.environ.get("HPCJAX_TEST_LANE", "main")
        with open(timeline, "a") as out:
            out.write(json.dumps({"worker": worker, "test": report.nodeid,
                                  "phase": report.when, "start": report.start, "stop": report.stop}) + "\n")


def pytest_terminal_summary(terminalreporter):
    """Each tier's test time against its budget (tests/budgets.toml): the suite's cost is watched as
    features come, run by run. A figure over its budget is said here, loudly; it fails nothing (a
    slower machine is no bug: the budget is raised, or the tests made cheaper, by a person)."""
    import tomllib

    if not SPENT:
        return
    budgets = tomllib.loads((TESTS / "budgets.toml").read_text())["seconds"]
    terminalreporter.section("test time by tier (tests/budgets.toml)")
    for tier in budgets:  # a tier's, or the waits lane's (tests/budgets.toml says why it has its own)
        if tier in SPENT:
            over = SPENT[tier] > budgets[tier]
            terminalreporter.write_line(f"{tier:10} {SPENT[tier]:7.0f} s of test time, budget {budgets[tier]} s"
                                        + ("   OVER BUDGET" if over else ""), red=over, green=not over)
            slowest = sorted(((s, test) for (t, test), s in TOOK.items() if t == tier), reverse=True)[:5]
            for seconds, test in slowest:  # where to look first when a tier grows
                terminalreporter.write_line(f"  {seconds:7.1f} s  {test}")


@pytest.fixture(scope="session", autouse=True)
def shared_compile_cache(tmp_path_factory):
    """One JAX compilation cache for every JAX program of this test session (hpcjax train's
    `auto`, the API's workers, checks): the same small programs compile in many tests, and
    compiling is most of their CPU time. Fresh per session (under pytest's base temporary
    directory, shared by the xdist workers), so no run starts from an earlier run's cache, unless
    set before (scripts/test.sh sets one, fresh, for all the tiers of its run).
    Tests of the cache itself name their own directory or take this one away."""
    from hpcjax.protocol.contract import COMPILE_CACHE_ENV

    base = tmp_path_factory.getbasetemp()
    root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    if not os.environ.get(COMPILE_CACHE_ENV):
        os.environ[COMPILE_CACHE_ENV] = str(root / "compile-cache")
    yield os.environ[COMPILE_CACHE_ENV]


@pytest.fixture(autouse=True)
def following_no_job(monkeypatch):
    """Each test starts as a process does, its SLURM watchers following no job: a job an earlier test
    of this worker left followed rides along in every later poll (hpcjax.slurm.controller.slurm_on),
    and `hpcjax status` in-process then asks about it too (CI of cde6629 and c5266de)."""
    controller = sys.modules.get("hpcjax.slurm.controller")
    if controller is not None:  # else no watcher exists yet (and importing it here would cost the pure tier)
        monkeypatch.setattr(controller, "_by_host", {})


@pytest.fixture(autouse=True)
def no_shared_cache_in_containers(request, monkeypatch):
    """A container sees only the directories bound into it: its jobs run without the session's cache."""
    if request.node.get_closest_marker("container"):
        from hpcjax.protocol.contract import COMPILE_CACHE_ENV

        monkeypatch.delenv(COMPILE_CACHE_ENV, raising=False)


@pytest.fixture
def empty(tmp_path, monkeypatch):
    """An empty working directory, hpcjax's home outside it, the local backend (the bad-input tests)."""
    monkeypatch.setenv("HPCJAX_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("HPCJAX_BACKEND", "local")
    work = tmp_path / "work"
    work.mkdir()
    return work


@pytest.fixture
def hpcjax_home(tmp_path, monkeypatch):
    """Job records of this test only."""
    home = tmp_path / "hpcjax-home"
    monkeypatch.setenv("HPCJAX_HOME", str(home))
    return home


@pytest.fixture(scope="session")
def slurm_cluster():
    """The running dev cluster; fails (does not skip) when it is not up."""
    if shutil.which("sbatch") is None:
        pytest.fail("sbatch is not installed: run slurm/devcluster/up.sh (the test command does)")
    env = dict(os.environ)
    env.setdefault("SLURM_CONF", str(DEVCLUSTER_CONF))
    os.environ["SLURM_CONF"] = env["SLURM_CONF"]
    ping = subprocess.run(["sinfo", "-h", "-N", "-o", "%N %t %G"], capture_output=True, text=True)
    if ping.returncode != 0:
        pytest.fail(f"the dev cluster is not up (sinfo: {ping.stderr.strip()}); run slurm/devcluster/up.sh")
    return ping.stdout


_releases_up: dict[str, str] = {}


@pytest.fixture
def release_cluster(release: str, slurm_cluster) -> str:
    """The `release`'s dev cluster (slurm/devcluster/up.sh --release; the test command starts every
    one) answers sinfo on its login side: its sinfo lines. Fails, never skips, when it is down."""
    from releases_support import on_release

    if release not in _releases_up:
        release_started_in_the_background(release)
        ping = on_release(release, "sinfo", "-h", "-N", "-o", "%N %t %G", timeout=60)
        if ping.returncode != 0:
            pytest.fail(f"the SLURM {release} dev cluster is not up ({ping.stderr.strip()[-500:]}); "
                        f"run slurm/devcluster/up.sh --release {release}")
        _releases_up[release] = ping.stdout
    return _releases_up[release]


def release_started_in_the_background(release: str, limit_s: float = 1200) -> None:
    """Wait for scripts/test.sh's background start of the release's cluster (HPCJAX_TEST_RELEASES_START:
    a folder with RELEASE.log and, once it ended, RELEASE.rc); fail with its log if it failed."""
    import time

    started = os.environ.get("HPCJAX_TEST_RELEASES_START")
    if not started or release == "22.05":
        return
    rc, deadline = Path(started) / f"{release}.rc", time.monotonic() + limit_s
    while not rc.exists():
        if time.monotonic() > deadline:
            pytest.fail(f"the SLURM {release} cluster did not start within {limit_s:.0f} s (log: {started}/{release}.log)")
        time.sleep(1)
    if rc.read_text().strip() != "0":
        log = (Path(started) / f"{release}.log").read_text()[-3000:]
        pytest.fail(f"slurm/devcluster/up.sh --release {release} failed:\n{log}")


@pytest.fixture(scope="session")
def ssh_cluster(slurm_cluster):
    """The dev cluster's login node over SSH (tests/sshd.py): a private sshd on 127.0.0.1 as the
    cluster user, for this session (each xdist worker has its own, and its own remote_dir)."""
    from sshd import Sshd

    made = subprocess.run(["bash", str(REPO / "slurm/devcluster/cluster-user.sh")], capture_output=True, text=True)
    if made.returncode != 0:
        pytest.fail(f"cannot make the cluster user: {made.stderr[-2000:]}")
    server = Sshd(DEVCLUSTER_CONF.parent.parent / "sshd", made.stdout.strip(), "python3")
    server.start()
    yield server
    server.cleanup()


@pytest.fixture(scope="session")
def ssh_cluster_own_python(slurm_cluster):
    """The SLURM 24.11 cluster over SSH as the cluster user, whose login side and ranks run Debian 13's
    own Python 3.13 and its own packages (slurm/devcluster/root-user.sh), not this machine's 3.11: the
    tests' sshd runs inside that release's root (tests/sshd.py)."""
    from sshd import Sshd

    release_started_in_the_background("24.11")
    made = subprocess.run(["bash", str(REPO / "slurm/devcluster/root-user.sh"), "24.11"], capture_output=True,
                          text=True)
    if made.returncode != 0:
        pytest.fail(f"cannot make the cluster user in the 24.11 root: {made.stderr[-2000:]}")
    server = Sshd(DEVCLUSTER_CONF.parent.parent / "sshd", made.stdout.strip().splitlines()[-1], "python3",
                  enter=("bash", str(REPO / "slurm/devcluster/enter.sh"), "24.11"))
    server.start()
    yield server
    server.cleanup()


@pytest.fixture
def laptop(tmp_path, monkeypatch, hpcjax_home):
    """This process as a laptop: no SLURM of its own (a local squeue or sbatch would fail), its
    records and working directory in places the cluster user cannot read."""
    monkeypatch.setenv("SLURM_CONF", str(tmp_path / "no-slurm-here.conf"))
    return tmp_path


@pytest.fixture
def shared_storage(request, slurm_cluster):
    """A directory both dev-cluster nodes see, outside /tmp (which hpcjax refuses as
    storage for a multi-node job: on a real cluster it is each node's own)."""
    where = shared_directory(request.node.name)
    yield where
    shutil.rmtree(where, ignore_errors=True)


def shared_directory(name: str) -> Path:
    """A new, empty directory both dev-cluster nodes see, for a test (or a module) of that name."""
    # a plain name: brackets of a parametrized test's id would reach Orbax (see test_train_config.py)
    plain = re.sub(r"[^A-Za-z0-9_.-]", "_", name[:60])
    where = DEVCLUSTER_CONF.parent.parent / "storage" / f"{plain}-{os.getpid()}"
    shutil.rmtree(where, ignore_errors=True)
    where.mkdir(parents=True)
    return where


def developer_script(name: str):
    """A module of scripts/ (the developer's generators, outside the package), loaded by its path."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, REPO / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_hpcjax(*args: str, cwd: Path | None = None, env: dict | None = None, timeout: float = 300):
    """Run the hpcjax command as a user would (`python -m hpcjax`, so a fresh machine's PATH need not
    know the console script yet), forked from a warm Python with hpcjax imported (tests/forkserver.py
    says why, and when it starts a fresh interpreter instead). Answers as subprocess.run does."""
    return forkserver.run(list(args), cwd, {**os.environ, **(env or {})}, timeout)


def start_hpcjax(*args: str, cwd: Path | None = None, env: dict | None = None):
    """run_hpcjax started, not waited for: its `.result(timeout)` is run_hpcjax's answer. A test
    whose jobs do not depend on each other starts them together (their queue waits overlap)."""
    process = subprocess.Popen([sys.executable, "-m", "hpcjax", *args], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, cwd=cwd, env={**os.environ, **(env or {})})
    process.result = lambda timeout=300: completed(process, timeout)
    return process


def completed(process: subprocess.Popen, timeout: float = 300) -> subprocess.CompletedProcess:
    """A started process waited for (killed if it outlasts `timeout`), answered as subprocess.run answers."""
    try:
        out, err = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        raise
    return subprocess.CompletedProcess(process.args, process.returncode, out, err)


def assert_rank_3_of_4_failed_alone(outcome, host: str, stopped_by: str) -> None:
    """The Run tests' failing job (2 nodes x 2 ranks; rank 3 exits 3) on any backend:
    rank 3 is the cause, named with its node and log tail; the other three were stopped."""
    assert (outcome.state, outcome.exit_code) == ("FAILED", 3)
    [failure] = outcome.failed
    assert (failure.rank, failure.host, failure.reason) == (3, host, "Exited with exit code 3")
    assert "rank three gives up" in failure.log_tail
    assert outcome.stopped == (0, 1, 2)
    assert f"ranks stopped by {stopped_by} after the failure: 0-2" in outcome.report()


@pytest.fixture(scope="session")
def charliecloud_image():
    """The Charliecloud image with JAX and NumPy but not hpcjax (containers/charliecloud-image.sh;
    the test command builds it once and keeps it between runs)."""
    image = os.environ.get("HPCJAX_TEST_IMAGE")
    if not image and os.environ.get("HPCJAX_TEST_IMAGE_BUILD"):
        image = image_built_in_the_background(Path(os.environ["HPCJAX_TEST_IMAGE_BUILD"]))
    if not image:
        built = subprocess.run(["bash", str(REPO / "containers" / "charliecloud-image.sh")], capture_output=True,
                               text=True, timeout=1800)
        if built.returncode != 0:
            pytest.fail(f"could not build the Charliecloud image:\n{built.stderr[-3000:]}")
        image = built.stdout.strip().splitlines()[-1]
    if not Path(image, ".hpcjax-image-complete").is_file():
        pytest.fail(f"{image} is not a complete image; run containers/charliecloud-image.sh")
    return image


def image_built_in_the_background(build: Path, limit_s: float = 1800) -> str:
    """The image that scripts/test.sh builds beside the main run: wait for the build's status
    file, then its path, or fail with the end of its log."""
    import time

    deadline = time.monotonic() + limit_s
    while not (build / "rc").is_file():
        if time.monotonic() > deadline:
            pytest.fail(f"the container image was not built within {limit_s:.0f} s; its log: {build / 'log'}")
        time.sleep(1)
    log = (build / "log").read_text(errors="replace") if (build / "log").is_file() else ""
    if (build / "rc").read_text().strip() != "0":
        pytest.fail(f"could not build the Charliecloud image (containers/charliecloud-image.sh):\n{log[-3000:]}")
    return (build / "path").read_text().strip().splitlines()[-1]

