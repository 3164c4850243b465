"""hpcjax.Trainer: Ray Train's JaxTrainer on SLURM (and on this machine's CPU).

    trainer = hpcjax.Trainer(train_func, train_loop_config={"lr": 0.01},
                             scaling_config=hpcjax.ScalingConfig(nodes=2, gpus_per_node=4),
                             run_config=hpcjax.RunConfig(storage_path="/shared/runs", name="exp1",
                                                         max_failures=1))
    result = trainer.fit()      # result.metrics, .metrics_history, .checkpoint, .path, .error

train_func runs on every rank once JAX is initialized for the layout; inside it,
hpcjax.report(metrics, checkpoint=dir) keeps rank 0's metrics and the latest checkpoint,
hpcjax.get_checkpoint() gives that checkpoint back to a resubmitted job.
"""

from __future__ import annotations

from hpcjax.api import calls, session, submit
from hpcjax.api.configs import Result, RunConfig, ScalingConfig
from hpcjax.api.submit import cancel_on_interrupt
from hpcjax.api.worker import run_train_loop, takes_argument
from hpcjax.values.errors import UsageError
from hpcjax.values.voice import say


class Trainer:
    def __init__(self, train_loop_per_worker, *, train_loop_config: dict | None = None,
                 scaling_config: ScalingConfig | None = None, run_config: RunConfig | None = None) -> None:
        if not callable(train_loop_per_worker):
            raise UsageError(f"train_loop_per_worker must be a function, got "
                             f"{type(train_loop_per_worker).__name__}: {train_loop_per_worker!r}",
                             "pass the function every rank runs: Trainer(train_func, ...)")
        calls.refuse_unreturnable(train_loop_per_worker, "train_loop_per_worker")
        if train_loop_config is not None and not takes_argument(train_loop_per_worker):
            raise UsageError(f"train_loop_config was given, but {train_loop_per_worker.__name__}() takes no argument",
                             "define it as def train_func(config): ... or drop train_loop_config")
        for name, value, kind in (("scaling_config", scaling_config, ScalingConfig),
                                  ("run_config", run_config, RunConfig)):
            if value is not None and not isinstance(value, kind):
                raise UsageError(f"{name} must be an hpcjax.{kind.__name__}, got {type(value).__name__}",
                                 f"build it with hpcjax.{kind.__name__}(...)")
        self.loop, self.config = train_loop_per_worker, train_loop_config
        self.scaling = scaling_config or ScalingConfig()
        self.run_config = run_config or RunConfig()
        # where it goes, resolved once (cluster= with backend='local' is refused now)
        self.cluster = self.scaling.going(self.run_config.backend)

    def fit(self) -> Result:
        """Run the loop as a job and wait for it (the job's state on stderr). A failed or
        preempted job is resubmitted up to max_failures times; each resumes from the latest
        reported checkpoint. Ctrl-C cancels the job and says so."""
        name = getattr(self.loop, "__name__", "train")
        backend = self.run_config.backend
        # From a laptop, the run directory is the cluster's, read through its SSH connection.
        cluster = self.cluster
        files = cluster.host().files if cluster.remote else session.HERE
        run_dir = self.run_config.run_dir(name, cluster)
        budget = self.run_config.max_failures
        jobs, error = [], None
        for failure in range(budget + 1):
            attempt = session.next_attempt(run_dir, files)
            [call] = submit.launch(run_train_loop, [((self.loop, self.config), {})], self.scaling,
                                   backend=backend, cluster=cluster, storage=run_dir, job_name=run_dir.name,
                                   session={"run_dir": str(run_dir), "attempt": attempt})
            jobs.append(call.job_id)
            with cancel_on_interrupt([call]):
                outcome = call.wait(progress=True, detail=lambda: session.describe_latest(run_dir, files))
            if outcome.ok:
                error = None
                break
            error = call.exception()
            if failure < budget:
                latest = session.latest_checkpoint(run_dir, files)
                say(f"job {call.job_id} {outcome.state}: resubmitting ({failure + 1} of at most {budget}), "
                    + (f"resuming from {latest.path}" if latest else "from the start (no checkpoint reported)"))
        history = session.history(run_dir, files)
        return Result(metrics=history[-1] if history else None, metrics_history=history,
                      checkpoint=session.latest_checkpoint(run_dir, files), path=str(run_dir), error=error,
                      jobs=jobs, starts=session.starts(run_dir, files))


JaxTrainer = Trainer  # Ray Train's name, so `from hpcjax import JaxTrainer` ports an example as is
