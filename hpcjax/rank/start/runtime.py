"""What every rank runs first: validate the mapping, then initialize JAX from it.

    from hpcjax.rank.start.runtime import initialize
    denv = initialize()          # before any other use of JAX

Every value is passed to jax.distributed.initialize explicitly and JAX's own
cluster detection is off, so nothing JAX guesses can override what the mapping
decided. Without a usable GPU, each process gets as many CPU devices as the GPUs
it owns in the layout, with gloo collectives: device counts and collectives then
behave as they would on GPUs.
"""

from __future__ import annotations

import importlib.util
import inspect
import os
import re
import socket
import sys
import time
from pathlib import Path
from typing import MutableMapping

from hpcjax.protocol import contract, timeouts
from hpcjax.values.errors import ConfigError, HpcjaxError, LayoutError
from hpcjax.rank.cache import compile_cache
from hpcjax.rank.watch import exitguard
from hpcjax.rank.start.mapping import DistributedEnv, resolve
from hpcjax.rank.start.rendezvous import RendezvousError, roll_call
from hpcjax.values.voice import say

CUDA_PLUGINS = ("jax_cuda12_plugin", "jax_cuda13_plugin")
PROXY_VARS = ("http_proxy", "https_proxy", "all_proxy", "grpc_proxy")


class InitializeError(HpcjaxError):
    """jax.distributed.initialize did not complete."""


def detect_gpu() -> bool:
    """A GPU JAX can use: the NVIDIA driver's device node and JAX's CUDA plugin."""
    return has_cuda_plugin() and os.path.exists("/dev/nvidiactl")


def has_cuda_plugin() -> bool:
    return any(importlib.util.find_spec(name) is not None for name in CUDA_PLUGINS)


# The variables container runtimes set inside: the name to say where a rank runs.
def container_name(environ: MutableMapping[str, str] = os.environ) -> str | None:
    """The runtime whose container this rank runs in (each runtime names the variables it sets)."""
    from hpcjax.containers.table import inside

    return inside(environ)


def check_gpu_usable(denv: DistributedEnv, environ: MutableMapping[str, str] = os.environ) -> None:
    """A node with NVIDIA GPUs whose JAX has no CUDA plugin would train on the CPU without a
    word: refuse, unless the CPU was asked for."""
    if denv.platform != "cpu" or environ.get(contract.PLATFORM_ENV) or not os.path.exists("/dev/nvidiactl") \
            or has_cuda_plugin():
        return
    inside = container_name(environ)
    raise LayoutError(
        f"this node has NVIDIA GPUs (/dev/nvidiactl) but this Python's JAX has no CUDA plugin "
        f"({', '.join(CUDA_PLUGINS)})" + (f", inside the {inside} container" if inside else "")
        + ": the ranks would run on the CPU",
        "use an image whose JAX matches its CUDA (NVIDIA's JAX image, or `hpcjax container recipe --jax "
        f"cuda12`), or set {contract.PLATFORM_ENV}=cpu to run on the CPU on purpose")


def init_timeout_s(environ: MutableMapping[str, str] = os.environ) -> int:
    try:
        return timeouts.init_timeout_s(environ)
    except ConfigError as error:
        raise InitializeError(error.message, error.hint) from None


def heartbeat_timeout_s(environ: MutableMapping[str, str] = os.environ) -> int:
    """How long a silent rank may go unheard (hpcjax.protocol.timeouts owns the rule)."""
    try:
        return timeouts.heartbeat_timeout_s(environ)
    except ConfigError as error:
        raise InitializeError(error.message, error.hint) from None


def prepare_environment(denv: DistributedEnv, environ: MutableMapping[str, str] = os.environ) -> None:
    """Set what JAX reads at import; must run before JAX creates its backends."""
    if denv.platform == "cpu":
        environ["JAX_PLATFORMS"] = "cpu"
        environ["JAX_NUM_CPU_DEVICES"] = str(denv.devices_per_process)
    if denv.is_distributed and proxy_configured(environ):
        # A proxy between ranks hangs the coordinator's gRPC connection.
        for name in ("no_proxy", "NO_PROXY"):
            entries = [e for e in environ.get(name, "").split(",") if e]
            if denv.coordinator_host not in entries:
                environ[name] = ",".join(entries + [denv.coordinator_host])


def proxy_configured(environ: MutableMapping[str, str]) -> bool:
    return any(environ.get(name) for name in PROXY_VARS + tuple(v.upper() for v in PROXY_VARS))


def initialize_kwargs(denv: DistributedEnv, timeout_s: int, accepted: set[str],
                      heartbeat_s: int = timeouts.DEFAULT_HEARTBEAT_TIMEOUT_S) -> dict:
    """The keyword arguments for jax.distributed.initialize, only those this JAX accepts
    (initialization_timeout since 0.6, heartbeat since 0.7, shutdown since 0.8.1)."""
    kwargs = dict(coordinator_address=denv.coordinator_address, num_processes=denv.num_processes,
                  process_id=denv.process_id, cluster_detection_method="deactivate",
                  initialization_timeout=timeout_s, heartbeat_timeout_seconds=heartbeat_s)
    if denv.platform == "gpu" and denv.local_device_ids is not None:
        kwargs["local_device_ids"] = list(denv.local_device_ids)
    return {k: v for k, v in kwargs.items() if k in accepted}


def describe(denv: DistributedEnv) -> str:
    ids = list(denv.local_device_ids) if denv.local_device_ids is not None else "emulated"
    return (f"hpcjax: process {denv.process_id}/{denv.num_processes} on {socket.gethostname()} "
            f"(pid {os.getpid()}): "
            f"coordinator {denv.coordinator_address} ({denv.sources.get('coordinator', '')}), "
            f"{denv.devices_per_process} {denv.platform.upper()} device(s) per process, local ids {ids}"
            + (f", in a {container_name()} container" if container_name() else ""))


_initialized: DistributedEnv | None = None  # what this process was initialized with
initialized_at: float | None = None  # time.monotonic() when initialize() returned


def process_age_s() -> float | None:
    """Seconds since this process started (Linux's /proc), for the time to first step."""
    try:
        start_ticks = int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19])
        uptime = float(Path("/proc/uptime").read_text().split()[0])
        return max(0.0, uptime - start_ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return None


def initialize(denv: DistributedEnv | None = None, *, timeout_s: int | None = None) -> DistributedEnv:
    """Map this process's environment and initialize JAX from it; returns the mapping.
    A second call returns the first call's mapping and does nothing else."""
    global _initialized
    if _initialized is not None:
        return _initialized
    global initialized_at
    _initialized = _initialize(denv, timeout_s)
    initialized_at = time.monotonic()
    return _initialized


def _initialize(denv: DistributedEnv | None, timeout_s: int | None) -> DistributedEnv:
    if denv is None:
        denv = resolve(os.environ, gpu_available=detect_gpu())
    check_gpu_usable(denv)
    timeout_s = timeout_s or init_timeout_s()
    prepare_environment(denv)
    import jax

    if denv.platform == "cpu":
        jax.config.update("jax_platforms", "cpu")
        jax.config.update("jax_num_cpu_devices", denv.devices_per_process)
        if denv.is_distributed:
            jax.config.update("jax_cpu_collectives_implementation", "gloo")
    compile_cache.enable_from_environment()
    say(describe(denv))
    if not denv.is_distributed:
        return denv
    # JAX's preemption service catches SIGTERM, so a rank that srun asks to stop
    # (another rank failed) lives on until SIGKILL. Preemption warnings come as
    # USR2 (the rendered script's --signal), so SIGTERM keeps its meaning: stop now.
    jax.config.update("jax_enable_preemption_service", False)
    if proxy_configured(os.environ):
        # The coordinator is in no_proxy now; JAX's warning about proxy variables would mislead.
        jax.config.update("jax_check_proxy_envs", False)
    # JAX aborts with a stack trace that names nobody when a process is missing;
    # the roll call first says who it is.
    accepted = set(inspect.signature(jax.distributed.initialize).parameters)
    try:
        with roll_call(denv.coordinator_host, denv.coordinator_port, denv.process_id, denv.num_processes,
                       timeout_s):
            jax.distributed.initialize(**initialize_kwargs(denv, timeout_s, accepted, heartbeat_timeout_s()))
    except RendezvousError:
        raise
    except Exception as err:  # XlaRuntimeError and friends, with gRPC text
        first_line = (str(err).strip().splitlines() or [type(err).__name__])[0]
        raise InitializeError(
            f"process {denv.process_id}: jax.distributed.initialize failed at coordinator "
            f"{denv.coordinator_address}: {first_line[:300]}",
            "every process arrived at the roll call, so look for a firewall or a port in use "
            "between them; `hpcjax env` shows what each rank derived") from err
    _previous_excepthook[:] = [sys.excepthook]
    sys.excepthook = _end_after_uncaught
    exitguard.arm()  # a finished program ends within seconds, with its own exit status
    return denv


def end_now_if_failed(code: int) -> None:
    """A process of a multi-process job that fails (`code` != 0) exits now. A normal exit
    runs JAX's shutdown, a barrier of every process, while the others may be waiting in a
    collective for this one: the job would end only at a timeout, minutes later (or, on GPUs,
    at the hang watch's). Its output is flushed first; other exit handlers do not run."""
    if code and _initialized is not None and _initialized.is_distributed:
        import logging

        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


_previous_excepthook: list = []  # the hook initialize() replaced: it still prints the traceback


def _end_after_uncaught(kind, value, trace) -> None:
    (_previous_excepthook or [sys.__excepthook__])[0](kind, value, trace)
    if re.search(contract.PEER_LOST, str(value)):
        return  # another process went away first: its own end is the one to report, not this consequence
    end_now_if_failed(130 if issubclass(kind, KeyboardInterrupt) else 1)
