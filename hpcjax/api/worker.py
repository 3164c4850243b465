"""Every rank of a job started from the Python API runs this:

    python -u -m hpcjax.api.worker CALL_DIR ELEMENT     (ELEMENT: a number, or "array")

It puts the caller's import path in place, initializes JAX for the layout (hpcjax.rank),
loads the call submitit pickled (its DelayedSubmission, through cloudpickle), runs it,
and leaves the outcome beside it: rank 0 its return value, every rank "success" or its
exception with the traceback, its rank and its node. A rank whose function raised exits
with 1, so srun (or the local backend) stops the others at once.
"""

from __future__ import annotations

import inspect
import os
import sys
import traceback
from pathlib import Path

from hpcjax.protocol import contract, placement, rundir
from hpcjax.api import folder, session
from hpcjax.values.voice import say

EXIT_RAISED = 1


def element_of(argument: str) -> int:
    if argument == folder.ARRAY_ELEMENT:
        return int(os.environ["SLURM_ARRAY_TASK_ID"])
    return int(argument)


def run_train_loop(loop, config):
    """What a Trainer's job runs on every rank: the user's loop, with its config if it
    takes one (Ray Train's rule). Its reports are its progress for the hang watch, which
    stops watching when it returns (what follows, saving the result, is not a step)."""
    from hpcjax.rank.watch import hangwatch

    try:
        return loop({} if config is None else config) if takes_argument(loop) else loop()
    finally:
        hangwatch.close()


def takes_argument(function) -> bool:
    try:
        parameters = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):  # a builtin without a signature: give it the config
        return True
    return any(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL) for p in parameters)


def user_traceback(error: BaseException) -> str:
    """The traceback from the user's function on: the worker's and submitit's own frames
    before it say nothing to the reader."""
    tb = error.__traceback__
    ours = (__file__, run_train_loop.__code__.co_filename)
    while tb is not None and tb.tb_next is not None and (
            tb.tb_frame.f_code.co_filename in ours or "submitit" in tb.tb_frame.f_code.co_filename):
        tb = tb.tb_next
    return "".join(traceback.format_exception(type(error), error, tb))


def main(argv: list[str]) -> int:
    call_dir, element = argv[0], element_of(argv[1])
    meta = folder.read_meta(call_dir)
    for entry in meta.get("sys_path", []):  # the caller's modules import here as there
        entry = os.path.abspath(entry)  # relative: in the job's snapshot of the caller's tree
        if entry not in sys.path:
            sys.path.append(entry)
    staged = Path(call_dir) / folder.DEPS
    if staged.is_dir():  # the caller's own copies: a call pickled by its cloudpickle unpickles only with it
        sys.path.insert(0, str(staged))  # (a cluster's older site-packages copy would otherwise shadow them)
    # Imported here: the rank side starts only once the call is known to be readable.
    import cloudpickle
    from submitit.core.utils import DelayedSubmission

    from hpcjax.rank.start.runtime import initialize

    run = meta.get("session") or {}
    if run.get("run_dir"):  # a Trainer run keeps its compilations, as `hpcjax train` does, unless the job names a cache
        os.environ.setdefault(contract.COMPILE_CACHE_ENV, str(Path(run["run_dir"]) / rundir.COMPILE_CACHE))
    denv = initialize()
    rank = denv.process_id
    layout = contract.Layout.from_env() or contract.Layout()
    session.start(session.Context(world_size=denv.num_processes, world_rank=rank,
                                  local_world_size=layout.tasks_per_node, layout=layout.as_dict(),
                                  attempt=run.get("attempt", 1), run_dir=run.get("run_dir")))
    result = folder.result_path(call_dir, element, rank)
    try:
        value = DelayedSubmission.load(folder.call_pickle(call_dir, element)).result()
        outcome = ("success", value if rank == 0 else None)
        code = 0
    except SystemExit as stop:  # sys.exit() in the function: the job ends with its status, as Python's would
        code = 0 if stop.code is None else stop.code if isinstance(stop.code, int) else 1
        text = (f"SystemExit: {stop.code!r} (the function called sys.exit instead of returning: no value came "
                "back)")
        say(text)
        outcome = ("error", text, None, {"rank": rank, "host": placement.node_name()})
    except Exception as error:  # the caller gets it, with the rank and node it happened on
        text = user_traceback(error)
        say(text)
        try:
            exception = cloudpickle.dumps(error)
        except Exception:  # not every exception pickles; the traceback text always travels
            exception = None
        outcome = ("error", text, exception, {"rank": rank, "host": placement.node_name()})
        code = EXIT_RAISED
    try:  # pickled whole before anything is written: a value that cannot be leaves no half file behind
        data = cloudpickle.dumps(outcome)
    except Exception as error:  # a return value that does not pickle (a lock, a generator): said with its type
        value = outcome[1]
        text = (f"rank {rank} returned a value of type {type(value).__module__}.{type(value).__qualname__}, which "
                f"cannot be pickled to come back to the caller ({type(error).__name__}: {error}): return plain data "
                "(numbers, strings, lists, dicts, NumPy arrays)")
        say(text)
        data = cloudpickle.dumps(("error", text, None, {"rank": rank, "host": placement.node_name()}))
        code = EXIT_RAISED
    write_whole(result, data)
    return code


def write_whole(path: Path, data: bytes) -> None:
    """The result file appears whole or not at all (the caller may read it at any moment)."""
    partial = path.with_name(f".{path.name}.partial")
    partial.write_bytes(data)
    partial.replace(path)


if __name__ == "__main__":
    code = main(sys.argv[1:])
    from hpcjax.rank.start.runtime import end_now_if_failed

    end_now_if_failed(code)  # not through JAX's shutdown barrier: the others may wait for this rank
    sys.exit(code)
