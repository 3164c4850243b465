"""The example scripts in slurm/: seed 002's layouts, rendered from the templates. A developer's
tool, not part of the package (issue 64): users render their own with `hpcjax render`.

Regenerate them with:  python scripts/slurm_examples.py slurm
A test fails, printing the diff and this command, when they are stale.
"""

from __future__ import annotations

import sys
from pathlib import Path

from hpcjax.slurm.script import render_sbatch
from hpcjax.job.spec import Container, JobSpec, Layout

REGENERATE = "python scripts/slurm_examples.py slurm"
# As on seed 002's cluster: the site's JAX container comes from a module that sets $JAX_IMAGE.
_SITE = dict(time="00:05:00", cpus_per_task=4, constraint="a100",
             modules=("dl", "jax/23.10-sif"),
             container=Container(runtime="singularity", image="$JAX_IMAGE"))


def _example(nodes: int, gpus_per_node: int, gpus_per_process: int, *command: str) -> JobSpec:
    layout = Layout(nodes=nodes, gpus_per_node=gpus_per_node, gpus_per_process=gpus_per_process)
    return JobSpec(layout=layout, job_name=layout.name, command=command, **_SITE)


EXAMPLES: dict[str, JobSpec] = {
    # 1 node, 4 GPUs, one process per GPU (seed: G4N1p4.slurm, query_v1.py)
    "G4N1p4.slurm": _example(1, 4, 1, "hpcjax", "check", "devices"),
    # 2 nodes x 2 GPUs, one process per node owning both (seed: G4N2p2.slurm, query_v2.py)
    "G4N2p2.slurm": _example(2, 2, 2, "hpcjax", "check", "devices"),
    # 2 nodes x 2 GPUs, one process per GPU (seed: G4N2p4.slurm)
    "G4N2p4.slurm": _example(2, 2, 1, "hpcjax", "check", "devices"),
    # 2 nodes x 4 GPUs, the all-reduce over all 8 (seed: allreduce.slurm)
    "G8N2p8-allreduce.slurm": _example(2, 4, 1, "hpcjax", "check", "allreduce"),
    # 2 nodes x 4 GPUs: the example transformer, FSDP across nodes and tensor parallel within
    "G8N2p8-train.slurm": JobSpec(**{**_SITE, "time": "02:00:00"}, job_name="G8N2p8-train",
                                  layout=Layout(nodes=2, gpus_per_node=4),
                                  command=("hpcjax", "train", "--strategy", "fsdp_tp", "--tensor-size", "4",
                                           "--steps", "2000", "--bf16", "--run-dir", "hpcjax-run")),
}


# The examples show the bind of hpcjax's rank side at a typical shared-venv path, not
# wherever this checkout happens to be.
EXAMPLE_BIND_SOURCE = "/shared/venvs/jax/lib/python3.11/site-packages/hpcjax"


def rendered_examples() -> dict[str, str]:
    import os

    from hpcjax.containers.binds import BIND_SOURCE_ENV

    before = os.environ.get(BIND_SOURCE_ENV)
    os.environ[BIND_SOURCE_ENV] = EXAMPLE_BIND_SOURCE
    try:
        return {name: render_sbatch(spec) for name, spec in EXAMPLES.items()}
    finally:
        if before is None:
            del os.environ[BIND_SOURCE_ENV]
        else:
            os.environ[BIND_SOURCE_ENV] = before


def main(argv: list[str]) -> int:
    out = Path(argv[0] if argv else "slurm")
    out.mkdir(parents=True, exist_ok=True)
    for name, text in rendered_examples().items():
        (out / name).write_text(text)
        print(out / name)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
