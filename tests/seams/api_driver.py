"""A seam cell's Python API caller, as a user's script: `python3 api_driver.py ENTRY MODE RELEASE
SETTINGS_JSON` in the cell's project (probe.py beside it). ENTRY: trainer (Trainer.fit), submit
(@remote's .submit(), then .result()) or map (.map() of two, then each .result()). Prints one
JSON line at the end: {"ok", "value" or "error", "rank", "host", "state", "jobs"}."""

import json
import sys

import hpcjax
import probe

entry, mode, release, settings = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
scaling = settings["scaling"]
env = settings.get("env") or {}
backend = settings.get("backend")
if env:
    scaling = {**scaling, "env": env}


def finish(ok, **more):
    print(json.dumps({"ok": ok, **more}), flush=True)


if entry == "trainer":
    trainer = hpcjax.Trainer(probe.loop, train_loop_config={"mode": mode, "release": release},
                             scaling_config=hpcjax.ScalingConfig(time=settings["time"], **scaling),
                             run_config=hpcjax.RunConfig(storage_path=settings["storage"], name="run",
                                                         backend=backend))
    result = trainer.fit()
    error = result.error
    finish(error is None, jobs=result.jobs, value=result.metrics, error=error and error.message,
           rank=error and error.rank, host=error and error.host,
           state=error.outcome.state if error is not None and error.outcome else "COMPLETED", run_dir=result.path)
else:
    work = hpcjax.remote(backend=backend, storage_path=settings["storage"], time=settings["time"],
                         **scaling)(probe.work)
    calls = [work.submit(mode, release)] if entry == "submit" else work.map([("ok", release), (mode, release)])
    print(json.dumps({"submitted": [c.job_id for c in calls]}), flush=True)
    results = []
    for call in calls:
        error = call.exception(progress=True)
        results.append({"ok": error is None, "value": None if error else call.result(), "job": call.job_id,
                        "error": error and error.message, "rank": error and error.rank, "host": error and error.host,
                        "state": call.run.outcome.state})
    last = results[-1]
    finish(last["ok"], jobs=[r["job"] for r in results], elements=results,
           **{k: last[k] for k in ("value", "error", "rank", "host", "state")})
