"""The triage table: real error texts (as JAX, XLA, NCCL, gloo, SLURM, the kernel and
Python print them) sorted into their causes, with the evidence line."""

from __future__ import annotations

import pytest

from hpcjax.follow.triage import CAUSES, classify, silent_ranks, triage

HEARTBEATS = """E1122 19:22:44.994423   17265 coordination_service.cc:1549] [10754179529654098767] Use error polling \
to propagate the following error to all tasks: UNAVAILABLE: The following tasks are unhealthy (stopped sending \
heartbeats):
3
The tasks have crashed. Check the task logs for an earlier error, or scheduler events (e.g. preemption, eviction) \
to debug further."""

TABLE = [
    ("frozen rank", HEARTBEATS),
    ("hang", "hpcjax: process 2 on node7: no progress for 31 s at step 41 (timeout 30 s = 5 x the longest "
             "interval 6.0 s, within floor 30 s and ceiling 1800 s); ending the job so it does not hang"),
    ("coordinator unreachable", "error: process 3 on vm: the coordinator host 'nosuchnode.invalid' does not resolve "
                                "here: name not known (Name or service not known)"),
    ("coordinator unreachable", "hpcjax: process 5: cannot reach the coordinator at node1:10624 yet: timed out "
                                "(a firewall may drop the packets, or the host is down); still trying (30 of 605 s)"),
    ("coordinator unreachable", "jaxlib.xla_extension.XlaRuntimeError: UNAVAILABLE: failed to connect to all "
                                "addresses; last error: UNKNOWN: ipv4:10.0.0.7:61517: Failed to connect to remote "
                                "host: Connection refused"),
    ("rank missing at start", "error: process(es) 1-7 of 8 did not arrive within 600 s (arrived: 0)"),
    ("rank missing at start", "jaxlib.xla_extension.XlaRuntimeError: DEADLINE_EXCEEDED: Barrier timed out. "
                              "Id: PjRT_Client_Connect. # of tasks that reached the barrier: 7/8."),
    ("invalid CUDA device ordinal", "jaxlib.xla_extension.XlaRuntimeError: INTERNAL: Failed call to cuDeviceGet: "
                                    "CUDA_ERROR_INVALID_DEVICE: invalid device ordinal"),
    ("out of device memory", "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while "
                             "trying to allocate 17179869184 bytes."),
    ("out of host memory", "slurmstepd: error: Detected 1 oom-kill event(s) in StepId=191.batch cgroup. Some of "
                           "your processes may have been killed by the cgroup out-of-memory handler."),
    ("out of host memory", "slurmstepd: error: Detected 2 oom_kill events in StepId=13. Some of the step tasks "
                           "have been OOM Killed."),
    ("out of host memory", "srun: error: Orion-01-01: task 4: Out Of Memory"),
    ("out of host memory", "[123456.789] Out of memory: Killed process 4242 (python3) total-vm:81234567kB, "
                           "anon-rss:65432100kB, file-rss:0kB, shmem-rss:0kB, UID:1000 pgtables:130000kB"),
    ("collective error", "INTERNAL: external/xla/xla/service/gpu/nccl_utils.cc:275: NCCL operation "
                         "ncclCommInitRank(&comm, nranks, id, rank) failed: unhandled cuda error"),
    ("collective error", "terminate called after throwing an instance of 'gloo::IoException'\n"
                         "  what():  [enforce fail at external/gloo/gloo/transport/tcp/pair.cc:446] "
                         "op.preamble.length <= op.nbytes. 4 vs 0"),
    # jax 0.10's words when a node's own hostname resolves nowhere (the dev cluster, a rank in a UTS namespace)
    ("this node's name does not resolve", "RuntimeError: Unable to initialize backend 'cpu': [enforce fail at "
                                          "external/gloo/gloo/transport/tcp/device.cc:99] rv == 0. -2 vs 0 (you may "
                                          "need to uninstall the failing plugin package, or set JAX_PLATFORMS=cpu "
                                          "to skip this backend.)"),
    ("time limit", "slurmstepd: error: *** JOB 1234 ON node1 CANCELLED AT 2026-11-22T10:00:00 DUE TO TIME "
                   "LIMIT ***"),
    ("warning signal not handled", "srun: error: node2: task 3: User defined signal 2"),
    ("preemption", "slurmstepd: error: *** JOB 1234 ON node1 CANCELLED AT 2026-11-22T10:00:00 DUE TO "
                   "PREEMPTION ***"),
    ("node failure", "slurmstepd: error: *** JOB 1234 ON node2 CANCELLED AT 2026-11-22T10:00:00 DUE TO NODE "
                     "FAILURE, SEE SLURMCTLD LOG FOR DETAILS ***"),
    # the dynamic loader's words (a program linked to a library that is not there, run here) and ctypes'
    ("a shared library did not load", "./needslib: error while loading shared libraries: ./libnosuch.so.8: "
                                      "cannot open shared object file: No such file or directory"),
    ("a shared library did not load", "OSError: libnosuch.so.8: cannot open shared object file: No such file or "
                                      "directory"),
    ("python exception", 'Traceback (most recent call last):\n  File "train.py", line 3, in <module>\n'
                         '    raise ValueError("rank three gives up")\nValueError: rank three gives up'),
    ("killed by a signal", "srun: error: node2: task 5: Killed"),
    ("killed by a signal", "srun: error: node1: tasks 0-3: Segmentation fault (core dumped)"),
]


@pytest.mark.parametrize("cause, text", TABLE, ids=[f"{c}-{i}" for i, (c, _) in enumerate(TABLE)])
def test_each_real_error_text_is_sorted_into_its_cause(cause, text):
    findings = classify(text, "rank 3 log")
    assert findings, f"nothing recognised in {text!r}"
    assert findings[0].cause == cause
    assert findings[0].evidence.startswith("rank 3 log: ")
    assert findings[0].hint


def test_every_cause_has_a_row_in_the_table():
    assert {c.name for c in CAUSES} == {cause for cause, _ in TABLE}


def test_a_clean_log_has_no_finding():
    assert classify("step 10/100  loss 2.5  gnorm 1.1\ndone: first loss 4.1, last 2.0\n") == []


def test_the_specific_cause_comes_before_its_consequences():
    found = triage({"rank 4 log": "srun: error: node2: tasks 4-7: Aborted", "rank 0 log": HEARTBEATS})
    assert [f.cause for f in found] == ["frozen rank", "killed by a signal"]


def test_the_silent_ranks_are_read_from_the_coordination_service():
    assert silent_ranks(HEARTBEATS) == [3]
    assert silent_ranks("... unhealthy (stopped sending heartbeats):\n2,5\nThe tasks ...") == [2, 5]
    assert silent_ranks("all good") == []
