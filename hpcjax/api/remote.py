"""`@hpcjax.remote`: a function that runs on every rank of a job and returns rank 0's value.

    @hpcjax.remote(nodes=2, gpus_per_node=4, time="00:30:00")
    def train(data_dir, lr):
        import jax                      # imports inside the function work as written
        ...
        return float(loss)

    train(hpcjax.Data("/shared/mnist"), 0.1)        # blocks; RemoteError if a rank raised
    call = train.submit(hpcjax.Data("/shared/mnist"), 0.1)   # the Run handle, with .result()
    calls = train.map([(d, 0.1), (d, 0.3)], max_parallel=2)  # one job per argument (a job array)
"""

from __future__ import annotations

import functools

from hpcjax.api import calls, submit
from hpcjax.api.submit import cancel_on_interrupt
from hpcjax.api.configs import ScalingConfig, storage_dir
from hpcjax.values.errors import UsageError


def remote(function=None, /, *, backend: str | None = None, storage_path: str | None = None, **options):
    """Decorate a function to run it as a job: every job option of ScalingConfig (nodes,
    gpus_per_node, gpus_per_process, time, partition, image, profile, ...), the backend
    ("slurm", "local", None for SLURM where sbatch exists) and where calls and logs are
    kept (`storage_path`, default ./hpcjax-calls; from a laptop, under the cluster's remote
    directory). `cluster=` (a profile naming a host, or an SSH destination) sends the job to a
    cluster over SSH; so do a profile's host and $HPCJAX_CLUSTER. Usable bare (@remote) or
    with options."""
    scaling = ScalingConfig(**options)  # every option checked here, at decoration
    if function is None:
        return lambda f: RemoteFunction(f, scaling, backend, storage_path)
    return RemoteFunction(function, scaling, backend, storage_path)


class RemoteFunction:
    def __init__(self, function, scaling: ScalingConfig, backend: str | None, storage_path: str | None) -> None:
        if not callable(function):
            raise UsageError(f"hpcjax.remote decorates a function, got {type(function).__name__}: {function!r}",
                             "put @hpcjax.remote(...) on a def, or call hpcjax.remote(...)(function)")
        calls.refuse_unreturnable(function, "hpcjax.remote's function")
        self.function, self.scaling, self.backend = function, scaling, backend
        self.storage_path = storage_path
        # where it goes, resolved once (a contradiction, cluster= with backend='local', is refused now)
        self.cluster = scaling.going(backend)
        functools.update_wrapper(self, function)

    def __call__(self, *args, **kwargs):
        """Run the function as a job and return rank 0's value (progress on stderr while
        it waits; Ctrl-C cancels the job)."""
        call = self.submit(*args, **kwargs)
        with cancel_on_interrupt([call]):
            return call.result(progress=True)

    def submit(self, *args, after=None, **kwargs) -> calls.Call:
        """Submit one job; return its handle at once (job_id, state(), logs(), cancel(), result()).
        `after`: a job (a handle, or "JOBID[:ok|:any]") or a list of them this one waits for; if one
        does not end as asked, this job is cancelled without starting."""
        return self._launch([(args, kwargs)], array=False, after=after)[0]

    def map(self, arguments, *, max_parallel: int | None = None) -> list[calls.Call]:
        """One job per element of `arguments` (a tuple is spread as the positional arguments,
        anything else is the one argument): a SLURM job array, or on the local backend jobs
        one after another, at most `max_parallel` at once; in a hold (`on=`), one job per element,
        queued in order. Returns the handles in order."""
        if isinstance(arguments, (str, bytes, dict)) or not hasattr(arguments, "__iter__"):
            raise UsageError(f"map() takes a list of arguments, one per job, got {type(arguments).__name__}: "
                             f"{arguments!r:.60}", "pass a list: f.map([1, 2, 3]), or f.map(range(4)); a single call "
                             "is f(x)")
        elements = [(a if isinstance(a, tuple) else (a,), {}) for a in arguments]
        if not elements:
            raise UsageError("map() was given no arguments", "pass a non-empty list: f.map([1, 2, 3])")
        if max_parallel is not None and (isinstance(max_parallel, bool) or not isinstance(max_parallel, int)
                                         or max_parallel < 1):
            raise UsageError(f"max_parallel must be an integer >= 1, got {max_parallel!r}",
                             "how many elements may run at once, e.g. max_parallel=4")
        if self.scaling.spec.on:  # a hold runs one job at a time: each element is one, queued in order
            return [self._launch([element], array=False)[0] for element in elements]
        return self._launch(elements, array=True, max_parallel=max_parallel)

    def _launch(self, elements, *, array: bool, max_parallel: int | None = None, after=None) -> list[calls.Call]:
        storage = storage_dir(self.storage_path, "hpcjax-calls", self.cluster)  # the machine whose SLURM runs it
        return submit.launch(self.function, elements, self.scaling, backend=self.backend, cluster=self.cluster,
                             storage=storage,
                             job_name=getattr(self.function, "__name__", "remote"), array=array,
                             max_parallel=max_parallel, after=after)
