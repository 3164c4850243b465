"""The training program: what `hpcjax train` runs on every rank.

    from hpcjax.train import TrainConfig, ModelConfig, train
    summary = train(TrainConfig(strategy="fsdp_tp", steps=200))

Modules follow the loop's stages: config (what to run, validated without JAX),
shardings (mesh and PartitionSpecs), model, data, step (optimizer and the jitted
step), loop (resume, step, record, checkpoint), metrics, checkpoint. Training
code imports rank code (to initialize JAX), never launch code. Importing this
package does not import JAX; `train` does, when it is first used.

Beside the loop: `pipeline` (pipeline parallelism), `stage` (the run's stage), `stop` (stopping
together on SLURM's warning), `warm` (what a restart reuses), `observe` (time to the first step,
traces), `pace` (which rank sets the pace), `scalars` (TensorBoard output).
"""

from hpcjax.train.config import STRATEGIES, ModelConfig, TrainConfig

__all__ = ["STRATEGIES", "ModelConfig", "TrainConfig", "train"]


def __getattr__(name: str):
    if name == "train":  # imports JAX: only when asked for
        from hpcjax.train.loop import train
        return train
    raise AttributeError(f"module 'hpcjax.train' has no attribute {name!r}")
