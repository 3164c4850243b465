"""The verbs of held allocations (their machinery: hpcjax.slurm.holds, this module's other side):
`hold` (one SLURM allocation that stays up, its batch script the hold's agent), `holds` (the ones
this machine knows, with what runs in them), `release` (end one).
A job runs in a hold with `--on NAME` on submit, smoke, train through submit, the Trainer and
@remote (hpcjax.slurm.holds and hpcjax.slurm.inhold)."""

from __future__ import annotations

import argparse
import json
import time

from hpcjax.cli.options import add_job_options, request_from_args
from hpcjax.cli.reach import add_cluster_options, cluster_from_args
from hpcjax.values.errors import UsageError
from hpcjax.values.voice import say
from hpcjax.cli.verbs import HELP

READY_EVERY_S = 0.5
# SLURM's KillWait (30 s by default) for what runs in a released hold to stop, then its nodes' clean-up
RELEASE_WAIT_S = 120.0
NOT_FOR_A_HOLD = (("on", "a hold cannot run inside another"), ("requeue", "a hold is not requeued"),
                  ("preflight", "run the preflight in the jobs you put in it: --on NAME --preflight"),
                  ("spares", "hold the nodes you want: --nodes N"))


def cmd_hold(args: argparse.Namespace, command: list[str]) -> int:
    import dataclasses

    from hpcjax.cli.following import interrupted_one
    from hpcjax.launch import steps
    from hpcjax.launch.request import job_and_cluster, submission
    from hpcjax.slurm import holds

    if command:
        raise UsageError("`hpcjax hold` holds an allocation and takes no command",
                         f"run one in it afterwards: hpcjax submit --on {args.name} -- COMMAND")
    check_name(args.name, "--name")
    request = request_from_args(args, ["hpcjax-hold"], ship_code=False, hold=True, hold_name=args.name,
                                announce=lambda job_id: print(job_id, flush=True))
    # SLURM's name for it: -J (or a profile's), else the hold's own
    request = dataclasses.replace(request, defaults={**request.defaults, "job_name": args.name})
    spec, cluster, values = job_and_cluster(request)
    for key, hint in NOT_FOR_A_HOLD:
        if getattr(spec, key):
            raise UsageError(f"--{key} cannot be used with `hpcjax hold`", hint)
    with holds.naming(args.name, cluster):  # two `hold --name X` at once: the second sees the first
        if any(h.name == args.name and not holds.ended(h, cluster) for h in holds.holds(cluster)):
            raise UsageError(f"a hold named {args.name!r} is up already", f"use it (--on {args.name}), release it "
                             f"(hpcjax release {args.name}), or give another --name")
        sub = submission(request, spec, cluster, values)
        try:
            [run] = steps.submit(sub)
        except KeyboardInterrupt as interrupt:
            return interrupted_one(interrupt, lambda run: stays_queued(args.name, run))
    if args.no_wait:
        return 0
    return wait_ready(run, args.name, sub)


def stays_queued(name: str, run) -> int:
    """Ctrl-C once the hold exists: it stays queued (it is what the user asked for), and is named."""
    say(f"\ninterrupted: hold {name} (job {run.job_id}) stays queued; `hpcjax holds` shows it, "
        f"`hpcjax release {name}` ends it")
    return 130


def check_name(name: str, flag: str) -> None:
    from hpcjax.job.spec import HOLD_NAME, HOLD_NAME_HINT

    if not HOLD_NAME.fullmatch(name):
        raise UsageError(f"invalid hold name {name!r}", HOLD_NAME_HINT.replace("--name", flag))


def wait_ready(run, name: str, sub) -> int:
    """Follow the hold until its agent is up, a line on stderr for each change; Ctrl-C leaves it queued."""
    from hpcjax.slurm import holds

    hold = holds.find(name, sub.cluster)
    last = None
    try:
        while True:
            state, shown = run.poll_surviving()
            if state == "RUNNING" and run.files.read_text(f"{hold.spool}/ready") is not None:
                status = run.status()
                say(f"hold {name} ready: job {run.job_id} on {status.nodelist} ({sub.spec.layout.described}, "
                    f"--time {sub.spec.time}); run jobs in it with --on {name}, end it with `hpcjax release "
                    f"{name}`")
                return 0
            if state not in ("PENDING", "RUNNING", "CONFIGURING"):
                outcome = run.wait(progress=False)
                say(f"hold {name} did not come up:\n{outcome.report()}")
                return outcome.exit_code or 1
            if shown != last:
                say(f"hold {name} (job {run.job_id}): {shown}")
                last = shown
            time.sleep(READY_EVERY_S)
    except KeyboardInterrupt:
        return stays_queued(name, run)


def listing(cluster) -> list[dict]:
    """Every hold this machine knows on that cluster, with SLURM's state, time left and its jobs."""
    from hpcjax.protocol.contract import FINISHED_STATES
    from hpcjax.job.walltime import parse_walltime
    from hpcjax.slurm import controller, holds
    from hpcjax.catalog import records

    slurm = controller.slurm_on(cluster.host())
    found = holds.holds(cluster)
    for hold in found:
        slurm.watcher.follow(hold.job_id)  # one squeue and one sacct for them all
    rows = []
    for hold in found:
        status = holds.status(hold, cluster)
        if status is None:  # forgotten by SLURM: it ended long ago
            rows.append({"name": hold.name, "job_id": hold.job_id, "state": "GONE", "note": "SLURM no longer knows its job"})
            continue
        limit = parse_walltime((records.load(hold.record_key) or {}).get("options", {}).get("time") or "0")
        row = {"name": hold.name, "job_id": hold.job_id, "state": status.state, "nodes": status.nodelist,
               "layout": hold.layout.name, "time_left": _left(limit, status.elapsed) if status.state == "RUNNING" else "",
               "running": "", "queued": 0}
        if status.state not in FINISHED_STATES:
            row["running"], row["queued"] = holds.queue_summary(slurm.host, hold)
        rows.append(row)
    return rows


def _left(limit_s: int | None, elapsed: str) -> str:
    from hpcjax.job.walltime import format_walltime
    from hpcjax.slurm.status import elapsed_seconds

    if not limit_s:
        return "unlimited"
    return format_walltime(max(0, limit_s - elapsed_seconds(elapsed)))


def cmd_holds(args: argparse.Namespace, command: list[str]) -> int:
    from hpcjax.protocol.contract import FINISHED_STATES

    from hpcjax.slurm import holds

    cluster = cluster_from_args(args)
    rows = [r for r in listing(cluster) if args.all or r["state"] not in FINISHED_STATES | {"GONE"}]
    others = sorted({f"{hold.name} ({holds.reach_flag(hold)})" for hold in holds.elsewhere(cluster)})
    if others:  # not asked of SLURM there (it may be over SSH): named, so that none seems lost
        say(f"holds made on other clusters (`hpcjax holds` with the flag lists them): {', '.join(others)}")
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    if not rows:
        say("no holds up" + ("" if args.all else " (--all lists the ended ones too)"))
        return 0
    print(f"{'NAME':<16} {'JOB':<8} {'STATE':<10} {'LAYOUT':<10} {'NODES':<14} {'LEFT':<10} RUNNING (QUEUED)")
    for r in rows:
        print(f"{r['name']:<16} {r['job_id']:<8} {r['state']:<10} {r.get('layout', ''):<10} {r.get('nodes', ''):<14} "
              f"{r.get('time_left', ''):<10} {r.get('running') or '-'} ({r.get('queued', 0)})")
    return 0


def cmd_release(args: argparse.Namespace, command: list[str]) -> int:
    from hpcjax.slurm import commands, controller, holds

    check_name(args.name, "release")
    cluster = cluster_from_args(args)
    hold = holds.find(args.name, cluster)
    if holds.ended(hold, cluster):
        say(f"hold {args.name} (job {hold.job_id}) had ended already")
        return 0
    controller.slurm_on(cluster.host()).run(commands.cancel(hold.job_id))
    if args.no_wait:
        say(f"released hold {args.name} (job {hold.job_id}); a job running in it ends with it")
        return 0
    return wait_gone(args.name, hold, cluster)


def wait_gone(name: str, hold, cluster) -> int:
    """Follow a released hold until SLURM lists it no more, its nodes free for the next job (a job in
    it that saves on SIGTERM keeps it COMPLETING for seconds); Ctrl-C leaves it ending."""
    from hpcjax.slurm import holds

    deadline = time.monotonic() + RELEASE_WAIT_S
    said = ""
    try:
        while state := holds.still_listed(hold, cluster):
            if time.monotonic() > deadline:
                say(f"released hold {name} (job {hold.job_id}), still {state} after {RELEASE_WAIT_S:.0f} s: SLURM "
                    f"is stopping what runs in it and cleaning up its nodes (`squeue -j {hold.job_id}` shows it "
                    "until it is gone)")
                return 0
            if state != said:
                say(f"hold {name} (job {hold.job_id}) ending: {state} (a job in it that saves on SIGTERM has "
                    "KillWait seconds)")
                said = state
            time.sleep(READY_EVERY_S)
    except KeyboardInterrupt:
        say(f"\ninterrupted: hold {name} (job {hold.job_id}) was released and is ending")
        return 130
    say(f"released hold {name} (job {hold.job_id}): ended, its nodes are free")
    return 0


def add_hold_verbs(sub) -> None:
    hold = sub.add_parser("hold", help=HELP["hold"])
    hold.add_argument("--name", default="hold", help="the hold's name, for --on NAME and release (default hold)")
    hold.add_argument("--no-wait", action="store_true", help="return once submitted, not when the hold is up")
    add_job_options(hold, job_name="hold", time="01:00:00")
    add_cluster_options(hold)
    hold.set_defaults(run=cmd_hold, takes_command=False, backend="slurm")

    listed = sub.add_parser("holds", help=HELP["holds"])
    listed.add_argument("--all", action="store_true", help="the ended ones too")
    listed.add_argument("--json", action="store_true", help="as JSON on stdout")
    add_cluster_options(listed, profile_file=True)
    listed.set_defaults(run=cmd_holds, takes_command=False)

    release = sub.add_parser("release", help=HELP["release"])
    release.add_argument("name", help="the hold's name (`hpcjax holds` lists them)")
    release.add_argument("--no-wait", action="store_true", help="return once cancelled, not when its nodes are free")
    add_cluster_options(release, profile_file=True)
    release.set_defaults(run=cmd_release, takes_command=False)
