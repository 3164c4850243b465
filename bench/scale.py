"""hpcjax's own commands at scale: how long `status`, `logs` and the failure analysis take
for a job of 512 ranks, and the analysis of 8,000 rank logs of 10 MB each.

    python bench/scale.py logs [--ranks 8000] [--megabytes 10]   # no cluster needed
    python bench/scale.py cluster [--nodes 64] [--gpus-per-node 8] [--maps 100]

`logs`: a synthetic log directory (sparse files: each log's last 20 kB is real training
output, the rest a hole, so 80 GB fit on a small disk; a reader that reads whole files still
reads every byte), one rank failing with a traceback, the others stopped by srun, as srun's
batch log says. Times the failure analysis as `hpcjax status` runs it (from this machine's
page cache and after dropping it, when root), and, as the baseline, reading whole logs as
the analysis did before it read tails (measured on 200 logs, scaled to all).

`cluster`: brings up a second dev cluster of 64 nodes x 8 GPUs beside the usual one (its own
directory and ports: HPCJAX_DEVCLUSTER_DIR=/var/lib/hpcjax-scale, port base 8800) and
measures, on jobs of 512 ranks of a trivial shell program (no JAX): submit to end; `status`,
`logs --tail 1` and `logs` after it ended; how soon `logs --follow` shows a line after it was
written; `status` of a job where rank 317 of 512 fails, and that it names rank 317; and a
`map` of 100 elements followed to the end, counting `squeue` and `sacct` calls per poll.
The cluster is left up (`bash slurm/devcluster/down.sh` with the same variables stops it).
Prints seconds and ratios; asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
TAIL = "".join(f"step {i}: loss {3 - i / 900:.4f} grad_norm 0.81 tokens/s 51234 mfu 0.41\n" for i in range(300))
TRACEBACK = ('Traceback (most recent call last):\n  File "train.py", line 88, in <module>\n    batch = next(it)\n'
             "RuntimeError: rank {rank} cannot read its shard /data/shard-{rank}.bin\n")


def make_logs(directory: Path, ranks: int, megabytes: int, failed: int) -> None:
    size = megabytes << 20
    for rank in range(ranks):
        end = (TAIL + (TRACEBACK.format(rank=rank) if rank == failed else "Terminated\n")).encode()
        with open(directory / f"9-rank{rank}.log", "wb") as log:
            log.write(b"hpcjax: process start\n")
            log.seek(size - len(end))
            log.write(end)
    lines = [f"hpcjax: attempt 1 of job 9 on node[1-{ranks // 8}]",
             f"srun: error: node{failed // 8 + 1}: task {failed}: Exited with exit code 1",
             "srun: launch/slurm: _step_signal: Terminating StepId=9.0"]
    for node in range(ranks // 8):  # srun's words for the ranks it stopped, a line per node as it prints them
        tasks = [r for r in range(node * 8, node * 8 + 8) if r != failed]
        lines.append(f"srun: error: node{node + 1}: tasks {tasks[0]}-{tasks[-1]}: Terminated" if len(tasks) == 8 else
                     f"srun: error: node{node + 1}: tasks {','.join(map(str, tasks))}: Terminated")
    (directory / "9.log").write_text("\n".join(lines) + "\n")


def drop_page_cache() -> bool:
    try:
        os.sync()
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
        return True
    except OSError:
        return False


def bench_logs(args) -> None:
    from hpcjax.follow.outcome import analyze, srun_events

    failed = args.ranks * 3 // 5 + 11
    with tempfile.TemporaryDirectory(dir=os.environ.get("HPCJAX_BENCH_DIR", ".")) as tmp:
        directory = Path(tmp)
        begun = time.monotonic()
        make_logs(directory, args.ranks, args.megabytes, failed)
        print(f"{args.ranks} rank logs of {args.megabytes} MB ({args.ranks * args.megabytes / 1024:.0f} GB, sparse) "
              f"made in {time.monotonic() - begun:.1f} s", file=sys.stderr)

        def analysis():
            batch = (directory / "9.log").read_text()
            begun = time.monotonic()
            outcome = analyze("9", "FAILED", srun_events(batch), lambda r: directory / f"9-rank{r}.log",
                              batch_log=batch)
            return time.monotonic() - begun, outcome

        timings = {}
        if drop_page_cache():
            timings["cold page cache"], outcome = analysis()
        timings["warm page cache"], outcome = analysis()
        named = [f.rank for f in outcome.failed] == [failed] and "cannot read its shard" in outcome.failed[0].log_tail
        sample = 200
        begun = time.monotonic()
        for rank in range(sample):
            Path(directory / f"9-rank{rank}.log").read_text(errors="replace")
        whole = (time.monotonic() - begun) * args.ranks / sample
        for name, seconds in timings.items():
            print(f"failure analysis of {args.ranks} logs, {name}: {seconds:.3f} s (goal < 5 s); reading every "
                  f"log whole, as before: ~{whole:.0f} s (200 logs timed, scaled); ratio {seconds / whole:.4f}")
        print(f"rank {failed} named: {'yes' if named else 'NO'}; cause: {outcome.causes[0].cause if outcome.causes else '-'}")
        first_failure_scan(directory, args.megabytes)


def first_failure_scan(directory: Path, megabytes: int) -> None:
    """A log of `megabytes` of output with an error line half way: the scan for its first
    failure, by grep -P and by the Python fallback."""
    from hpcjax.hosts.files import LocalFiles
    from hpcjax.follow.ranklogs import RankLogs

    path = directory / "early.log"
    with open(path, "w") as log:
        count = (megabytes << 20) // len(TAIL)
        for i in range(count):
            log.write(TAIL if i != count // 2 else "ValueError: the data set has no rows (caught; it went on)\n")

    class NoGrep(LocalFiles):
        def first_match(self, path, pattern):
            return None

    for name, files in (("grep -P", LocalFiles()), ("Python, no grep -P", NoGrep())):
        begun = time.monotonic()
        line = RankLogs(lambda r: path, files).first_failure(0)
        print(f"first failure in a {megabytes} MB log whose tail shows none, {name}: {time.monotonic() - begun:.2f} s "
              f"({'found' if line.startswith('ValueError') else 'NOT found'})")


def hpcjax(*words: str, env: dict) -> tuple[float, subprocess.CompletedProcess]:
    begun = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "hpcjax", *words], capture_output=True, text=True, env=env,
                          timeout=600)
    return time.monotonic() - begun, done


def bench_cluster(args) -> None:
    variables = {"HPCJAX_DEVCLUSTER_DIR": "/var/lib/hpcjax-scale", "HPCJAX_DEVCLUSTER_PORT_BASE": "8800",
                 "HPCJAX_DEVCLUSTER_NODES": str(args.nodes), "HPCJAX_DEVCLUSTER_GPUS": str(args.gpus_per_node)}
    up = subprocess.run(["bash", str(HERE.parent / "slurm/devcluster/up.sh")], env={**os.environ, **variables},
                        capture_output=True, text=True)
    if up.returncode != 0:
        sys.exit(f"the {args.nodes}-node cluster did not come up:\n{up.stderr[-3000:]}")
    env = {**os.environ, "SLURM_CONF": "/var/lib/hpcjax-scale/etc/slurm.conf"}
    ranks = args.nodes * args.gpus_per_node
    layout = ["--nodes", str(args.nodes), "--gpus-per-node", str(args.gpus_per_node)]
    with tempfile.TemporaryDirectory(dir=os.environ.get("HPCJAX_BENCH_DIR", ".")) as tmp:
        logs = ["--output-dir", str(Path(tmp) / "logs")]
        seconds, done = hpcjax("submit", *layout, *logs, "--wait", "--", "sh", "-c",
                               'echo "rank $SLURM_PROCID up"; sleep 2; echo "rank $SLURM_PROCID done"', env=env)
        job = done.stdout.split()[0]
        print(f"{ranks} ranks: submit to end {seconds:.1f} s (the program sleeps 2 s); job {job} {done.returncode=}")
        for words in (("status", job), ("logs", job, "--tail", "1"), ("logs", job)):
            seconds, done = hpcjax(*words, env=env)
            print(f"  hpcjax {' '.join(words)}: {seconds:.2f} s (goal < 2 s), {len(done.stdout.splitlines())} lines")
        follow_latency(layout, logs, env)
        seconds, done = hpcjax("submit", *layout, *logs, "--wait", "--", "sh", "-c",
                               'if [ "$SLURM_PROCID" = 317 ]; then sleep 1; echo "RuntimeError: rank 317 failed" >&2; '
                               'exit 3; fi; sleep 60', env=env)
        job = done.stdout.split()[0]
        seconds, status = hpcjax("status", job, env=env)
        named = "rank 317 on" in status.stdout and "failed: Exited with exit code 3" in status.stdout
        print(f"  one rank of {ranks} fails: `hpcjax status` {seconds:.2f} s (goal < 2 s); names rank 317: "
              f"{'yes' if named else 'NO'}")
        count_map_queries(args.maps, env, Path(tmp))


def follow_latency(layout, logs, env) -> None:
    """Seconds between a line's writing (its own timestamp) and `logs --follow` printing it."""
    _, done = hpcjax("submit", *layout, *logs, "--", "sh", "-c",
                     'if [ "$SLURM_PROCID" = 5 ]; then for i in 1 2 3 4 5 6; do sleep 1; '
                     'echo "tick $(date +%s.%N)"; done; else sleep 7; fi', env=env)
    job = done.stdout.split()[0]
    follower = subprocess.Popen([sys.executable, "-m", "hpcjax", "logs", job, "--rank", "5", "--follow"],
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
    delays = [time.time() - float(line.split()[1]) for line in follower.stdout if line.startswith("tick ")]
    follower.wait()
    if delays:
        print(f"  logs --follow: a line shown {min(delays):.2f}-{max(delays):.2f} s after it was written "
              f"(goal < 2 s; {len(delays)} lines)")


def count_map_queries(elements: int, env, tmp: Path) -> None:
    """A map of `elements` array elements followed to the end in this process, with every
    squeue and sacct call counted."""
    os.environ["SLURM_CONF"] = env["SLURM_CONF"]
    import hpcjax
    from hpcjax.slurm import controller as slurmctl

    calls: dict[str, int] = {}
    real = slurmctl.Slurm.run

    def counting(self, argv, *a, **k):
        calls[argv[0]] = calls.get(argv[0], 0) + 1
        return real(self, argv, *a, **k)

    slurmctl.Slurm.run = counting
    square = hpcjax.remote(backend="slurm", storage_path=str(tmp / "calls"))(pow)
    begun = time.monotonic()
    handles = square.map([(n, 2) for n in range(elements)])
    results = [h.result() for h in handles]
    polls = slurmctl.slurm_on().watcher.queries
    print(f"  map of {elements}: {time.monotonic() - begun:.1f} s, results right: {results == [n * n for n in range(elements)]}; "
          f"squeue calls {calls.get('squeue', 0)}, sacct calls {calls.get('sacct', 0)}"
          + f" over {polls} polls of the watcher")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="what", required=True)
    logs = sub.add_parser("logs")
    logs.add_argument("--ranks", type=int, default=8000)
    logs.add_argument("--megabytes", type=int, default=10)
    cluster = sub.add_parser("cluster")
    cluster.add_argument("--nodes", type=int, default=64)
    cluster.add_argument("--gpus-per-node", type=int, default=8)
    cluster.add_argument("--maps", type=int, default=100)
    args = parser.parse_args()
    bench_logs(args) if args.what == "logs" else bench_cluster(args)


if __name__ == "__main__":
    main()
