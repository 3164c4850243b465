"""Barriers of JAX's coordination service: the processes of a job wait for each other
over gRPC, without the devices.

    from hpcjax.rank.start.barriers import line_up
    line_up("first step")   # every process, in the same order, before the program's first collective

Why a program needs one before its first collective: a collective's communicator is made
when it is first used, and the processes must all join it within a fixed time. JAX's CPU
collectives (gloo, XLA's key-value store) give a process 30 seconds, not configurable from
JAX 0.10; processes that reach their first collective further apart than that fail with
`Gloo context initialization failed: DEADLINE_EXCEEDED: GetKeyValue() timed out`. They do,
on a busy machine or when one process found its program in the compilation cache and
another compiled it (JAX's persistent cache is written by process 0 only). A barrier just
before absorbs that difference with the job's own start-up budget (HPCJAX_INIT_TIMEOUT).
"""

from __future__ import annotations

from collections import Counter

NAMESPACE = "hpcjax/line-up"
_passed: Counter = Counter()  # barrier ids must not repeat within a job: each name's calls are numbered


def coordination_client():
    """JAX's coordination-service client, or None when this process is not distributed."""
    from jax._src import distributed

    return distributed.global_state.client


def line_up(name: str, timeout_s: float | None = None) -> None:
    """Return once every process of the job has called `line_up(name)` as often as this one;
    at once in a single process. A process that never comes is the hang watch's and srun's
    to end; this waits at most `timeout_s` (default: the job's start-up timeout)."""
    import jax

    client = coordination_client()
    if client is None or jax.process_count() == 1:
        return
    if timeout_s is None:
        from hpcjax.rank.start.runtime import init_timeout_s

        timeout_s = init_timeout_s()
    _passed[name] += 1
    client.wait_at_barrier(f"{NAMESPACE}/{name}/{_passed[name]}", int(timeout_s * 1000))
