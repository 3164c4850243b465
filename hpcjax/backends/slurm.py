"""The SLURM backend: a job is the rendered batch script, given to sbatch on this machine or on a
cluster's login node over SSH, and followed through squeue and sacct (hpcjax.slurm, where every
SLURM command line is built)."""

from __future__ import annotations

import shutil
import subprocess

from hpcjax.backends import Backend, Queued, register
from hpcjax.catalog import db, keep, records
from hpcjax.containers import binds
from hpcjax.hosts.cluster import THIS_MACHINE
from hpcjax.protocol.contract import FINISHED_STATES
from hpcjax.values.errors import HpcjaxError, SlurmNotFound, SubmitError, UsageError
from hpcjax.values.voice import say

# A dry run asks the scheduler once, briefly: a controller that does not answer leaves the script shown.
ESTIMATE_TIMEOUT_S = 10.0
from hpcjax.values import jobid
from hpcjax.slurm import commands, conf, controller, dependencies, holds, inhold
from hpcjax.slurm.job import SlurmRun
from hpcjax.slurm.status import parse_attempts


@register
class SlurmBackend(Backend):
    name = "slurm"
    order = 10
    reaches_clusters = True
    holds_allocations = True

    def available(self) -> bool:
        return shutil.which("sbatch") is not None

    def unavailable(self) -> str:
        return "no SLURM on this machine (no `sbatch`)"

    def wants(self, sub) -> dict:
        if not sub.cluster.remote:  # before any question: SLURM's commands retry an unreadable conf for 60 s
            conf.check_conf()
        image, sources = binds.paths_to_check(sub.spec)
        there = [path for path, on_cluster in sub.data if on_cluster]
        asks = {}
        if sub.spec.after:
            asks.update(dependencies.asks(sub.spec.after))
        if sub.spec.array:
            asks["config"] = commands.config()
        if sub.spec.exclude and not sub.spec.on:
            asks["nodes"] = commands.node_names(sub.spec.partition)
        if sub.spec.on and inhold.asks_of_the_hold(sub.spec):  # its partition, account, QOS, time left
            asks["hold"] = commands.controller_job(inhold.the_hold(sub).job_id)
        if not sub.spec.on:  # what the partition and the QOS allow (a job in a hold has the hold's)
            asks["partitions"] = commands.partitions()
            if sub.spec.qos:
                asks["qos"] = commands.qos_limits()
            if sub.spec.qos or sub.spec.account:  # whether they are the user's, and what the site enforces
                asks.update(config=commands.config(), associations=commands.everyones_associations(), user=["id", "-un"],
                            default_accounts=commands.everyones_default_accounts())
        return {"programs": ["sbatch"], "paths": ([image] if image else []) + sources + there, "commands": asks}

    def check(self, sub, probe) -> None:
        where = sub.cluster.name
        if not sub.cluster.remote:
            conf.check_conf()
        self._check_paths(sub, probe)
        if sub.spec.on:
            inhold.check(sub, probe.answer("hold"))
        if "sbatch" in probe.missing_programs:
            if sub.cluster.remote:
                raise SlurmNotFound(f"`sbatch` is not on the PATH of {where} in a login shell",
                                    f"check `ssh {sub.cluster.destination} bash -lc 'command -v sbatch'`; a site module "
                                    "may be needed in ~/.bash_profile, or name the login node of the SLURM cluster")
            raise SlurmNotFound("SLURM is not installed on this machine (no `sbatch` on the PATH)",
                                "run `hpcjax submit` on the cluster's login node, or on this machine's CPU with "
                                "--backend local")
        dependencies.check(sub.spec.after, probe, sub.cluster.name)
        self._check_excluded(sub, probe)
        self._check_fits(sub, probe)
        most = controller.config_values(probe.answer("config")[1]).get("MaxArraySize", "")
        if sub.spec.array and most.isdigit() and sub.spec.array > int(most) - 1:
            raise UsageError(f"the job array has {sub.spec.array} elements; SLURM on {where} takes at most "
                             f"{int(most) - 1} (MaxArraySize = {most})",
                             "sweep fewer values, or split the sweep into several submissions")

    def _check_excluded(self, sub, probe) -> None:
        """A job whose excluded nodes (--exclude, a profile's, the nodes a preflight failed lately)
        leave fewer than it needs could never start: SLURM would keep it pending for ever."""
        code, text = probe.answer("nodes")
        rows = [line.strip().split("|") for line in text.splitlines() if line.count("|") == 1]
        # a job that names no partition goes to SLURM's default one: its nodes, not every partition's
        nodes = sorted({node for node, partition in rows if sub.spec.partition or partition.endswith("*")})
        if not sub.spec.exclude or code != 0 or not nodes:
            return
        left = [node for node in nodes if node not in sub.spec.exclude]
        needed = sub.spec.layout.nodes + sub.spec.spares
        if len(left) < needed:
            where = f"partition {sub.spec.partition}" if sub.spec.partition else sub.cluster.name
            raise UsageError(f"the job needs {needed} node(s), and excluding {', '.join(sub.spec.exclude)} leaves "
                             f"{len(left)} of the {len(nodes)} on {where}" + (f" ({', '.join(left)})" if left else ""),
                             "exclude fewer nodes (--exclude, the profile's exclude, avoid_failed_hours), or ask for "
                             f"fewer: --nodes {max(1, len(left) - sub.spec.spares)}")

    def _check_fits(self, sub, probe) -> None:
        """The partition and the QOS can ever run the job (hpcjax.slurm.fit); an answer that did not come
        leaves that check to SLURM."""
        from hpcjax.slurm import enforce, fit, site  # the site's rules: a submission's check only

        code, text = probe.answer("partitions")
        partitions = site.read_partitions(text) if code == 0 else []
        code, text = probe.answer("qos")
        qos = {row["Name"]: row for row in site.read_rows(text, commands.QOS_FIELDS)} if code == 0 else {}
        for note in enforce.judge(sub.spec, probe.answer, sub.cluster.name,
                                  lambda: fit.check(sub.spec, partitions, qos, sub.cluster.name)):
            say(f"note: {note}")

    def _check_paths(self, sub, probe) -> None:
        """The image and the bind sources exist where the job is submitted (on a cluster: there);
        Data named on the cluster is there."""
        if not sub.cluster.remote:
            binds.check_before_submit(sub.spec)
            return
        image, sources = binds.paths_to_check(sub.spec)
        if image and image in probe.missing_paths:
            raise binds.missing_image(image, f"on {sub.cluster.name}")
        missing = [s for s in sources if s in probe.missing_paths]
        if missing:
            raise UsageError(f"bind source(s) not on {sub.cluster.name}: {', '.join(missing)}",
                             "bind paths are the cluster's: fix the path, or upload a local directory with --upload")
        gone = [path for path, on_cluster in sub.data if on_cluster and path in probe.missing_paths]
        if gone:
            raise UsageError(f"Data path(s) not on {sub.cluster.name}: {', '.join(gone)}",
                             f"check the path there (ssh {sub.cluster.destination} ls -d PATH), or give a local "
                             "directory to upload: Data('./my_dataset')")

    def render(self, sub) -> tuple[str, str]:
        from hpcjax.slurm.script import render_sbatch  # the template engine: submissions only

        if sub.spec.on:
            in_hold = inhold.spec_in(inhold.the_hold(sub), sub.spec)  # its steps take the hold's GPU type
            return render_sbatch(in_hold), (f"dry run: would run {sub.spec.layout.described} in hold {sub.spec.on} "
                                            "with this script:")
        return render_sbatch(sub.spec, hold=sub.hold), f"dry run: would submit {sub.spec.layout.described} with this script:"

    def estimate(self, sub) -> str:
        """sbatch --test-only of the very script (on stdin; nothing is submitted): what sbatch would
        refuse is refused here, with its hint, and SLURM's estimate of the start is said."""
        if sub.spec.on:
            return ""  # a job in a hold starts when the hold's agent reaches it
        when, why = self._test_only(sub)
        if when is None:
            return f"SLURM's estimate: none ({why})"
        return f"SLURM's estimate (sbatch --test-only, nothing submitted): it would start {when}"

    @staticmethod
    def _test_only(sub) -> tuple[str | None, str]:
        """(when SLURM expects the job to start: "now", "at DATE", "not known (...)"; or None and why there is
        no estimate). SubmitError when the scheduler says it could never run (sbatch would refuse it)."""
        from hpcjax.slurm import free

        try:
            done = sub.cluster.host().run(commands.test_only(), input=sub.script, timeout=ESTIMATE_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            return None, f"sbatch --test-only gave no answer in {ESTIMATE_TIMEOUT_S:.0f} s"
        said = (done.stderr + done.stdout).strip()
        if done.returncode != 0:
            dependencies.check_refusal(sub.spec.after, said, sub.cluster.host())
        if done.returncode != 0 and "allocation failure" in said:  # the scheduler's verdict: sbatch would refuse
            raise SubmitError(f"sbatch --test-only refused the job ({sub.spec.layout.name}): {said}",
                              controller.slurm_on(sub.cluster.host()).refusal_hint(said))
        if done.returncode != 0:  # no verdict (the controller unreachable, ...): the job is still shown or sent
            return None, f"sbatch --test-only: {said.splitlines()[-1] if said else 'no answer'}"
        when = free.read_estimate(0, said)
        return ("at " if when[:1].isdigit() else "") + when, ""

    def queue(self, sub) -> list[Queued]:
        from hpcjax.slurm import sbatch  # the template engine: submissions only

        cluster = sub.cluster
        if sub.spec.on:  # a job inside a held allocation: queued for the hold's agent, no sbatch
            run, more = inhold.queue(sub)
            return [Queued(run, run.job_id, None, tuple(more.items()))]
        self._say_start(sub)
        job_id = sbatch.there(sub.script, sub.spec, cluster, sub.home_there, sub.workdir, sub.log_dir) \
            if cluster.remote else sbatch.here(sub.script, sub.spec)
        held = (("kind", holds.KIND), ("hold_name", sub.hold_name or sub.spec.job_name), ("job_id", job_id)) \
            if sub.hold else ()
        return [Queued(SlurmRun(job_id if i is None else f"{job_id}_{i}", sub.log_dir, sub.spec.layout.num_processes,
                                cluster), job_id, i, held) for i in sub.elements]

    def release(self, sub, queued: list[Queued]) -> None:
        """SLURM starts it; said once it is recorded."""
        if sub.spec.on:
            return
        job_id, cluster = queued[0].job_id, sub.cluster
        what = f"job {job_id}" if not sub.spec.array else f"job array {job_id} of {sub.spec.array} elements"
        what = f"hold {sub.hold_name or sub.spec.job_name} ({what})" if sub.hold else what
        where = f" on {cluster.name}" if cluster.remote else ""
        say(f"submitted {what}{where} ({sub.spec.layout.described}); logs in {sub.log_dir}/")

    def _say_start(self, sub) -> None:
        """When SLURM expects the job to start, asked before it is sent (sbatch --test-only of its script):
        a job the scheduler could never place is refused here, before anything is queued. Once queued, the
        wait's lines say squeue's estimate (%S) as it changes."""
        when, why = self._test_only(sub)
        # sbatch --test-only leaves dependencies out: "now" would be wrong for a job that waits for another
        after = f", once job {' and '.join(job for job, _ in sub.spec.after)} has ended (--after)" if sub.spec.after \
            else ""
        say(f"SLURM's estimate (sbatch --test-only): it would start {when}{after}" if when else
            f"SLURM's estimate: none ({why})")

    def attach(self, job_id: str, record: dict | None, cluster) -> SlurmRun:
        if jobid.is_hold_step(job_id):
            return inhold.InHoldRun.attach(job_id, record, cluster)
        return SlurmRun.attach(job_id, record, cluster)

    def refresh(self, conn, rows: list[dict]) -> None:
        """Unfinished runs (their attempts too, once accounting has them) from one `sacct
        --duplicates` per cluster: each requeued attempt is a row with its start, end, nodes, GPUs."""
        by_cluster: dict[str, list[dict]] = {}
        for row in rows:
            if not keep.settled(row):
                by_cluster.setdefault(row["cluster"] or "", []).append(row)
        for cluster, group in by_cluster.items():
            try:
                slurm = self.attach(group[0]["job_id"], records.load(group[0]["key"]), THIS_MACHINE).slurm if cluster \
                    else controller.slurm_on()
                found = parse_attempts(slurm.run(commands.attempts(row["job_id"] for row in group)))
            except HpcjaxError as error:
                say(f"hpcjax: note: could not ask SLURM{' on ' + cluster if cluster else ''} about {len(group)} "
                    f"run(s): {error.message}; shown as last seen")
                continue
            unstarted = []
            for row in group:
                if jobid.is_hold_step(row["job_id"]):  # not SLURM's: its hold's queue says how it is
                    self._refresh_in_hold(conn, row)
                    continue
                attempts = found.get(row["job_id"])
                if attempts:  # else not in accounting yet (just submitted), or forgotten: as last seen
                    state = attempts[-1]["state"]
                    db.save(conn, row["key"], state=state, final=state in FINISHED_STATES,
                            exit_code=attempts[-1]["exit_code"])
                    db.save_attempts(conn, row["key"], attempts)
                elif "_" in row["job_id"]:
                    unstarted.append(row)
            self._refresh_unstarted(conn, slurm, unstarted)

    @staticmethod
    def _refresh_unstarted(conn, slurm, rows: list[dict]) -> None:
        """Array elements accounting has no attempt of: pending, or cancelled while pending (which
        leaves no row of its own); the watcher asks about them all at once."""
        for row in rows:
            slurm.watcher.follow(row["job_id"])
        for row in rows:
            try:
                status = slurm.job_status(row["job_id"])
            except HpcjaxError:
                continue  # as last seen
            if status.finished:
                db.save(conn, row["key"], state=status.state, final=True, exit_code=status.job_exit_code)

    def _refresh_in_hold(self, conn, row: dict) -> None:
        try:
            status = self.attach(row["job_id"], records.load(row["key"]), THIS_MACHINE).status()
        except HpcjaxError:
            return  # its hold's queue is gone: as last seen
        db.save(conn, row["key"], state=status.state, final=status.finished, exit_code=status.job_exit_code)

    def stacks(self, run, environment: str, node_side) -> tuple[str, str]:
        """The node side once on every node of the job, beside its steps (`srun --overlap`)."""
        job, known_as = run.srun_ids()
        nodes = run.slurm.hostnames(run.status().nodelist)
        argv = commands.on_each_node(job, len(nodes), environment, node_side(known_as),
                                     overlap=run.slurm.has("srun", "--overlap"))
        done = run.host.run(argv, timeout=120)
        return done.stdout, done.stderr
