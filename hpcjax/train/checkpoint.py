"""Checkpoints with Orbax: the full train state and the data position, saved
asynchronously every N steps into the run directory; a run starts from the
latest complete one.

Orbax rather than hand-written saving: it writes sharded arrays from every
process in parallel, commits a step atomically (a half-written step is never
"latest"), copies to host before returning so training can go on while the
files are written, and restores straight into the shardings asked for.
"""

from __future__ import annotations

from pathlib import Path

import jax
import orbax.checkpoint as ocp

KEEP = 3  # checkpoints kept on disk


class Checkpoints:
    def __init__(self, directory: Path, every: int) -> None:
        options = ocp.CheckpointManagerOptions(save_interval_steps=max(1, every), max_to_keep=KEEP,
                                               enable_async_checkpointing=True)
        self.directory = Path(directory).resolve()
        self.manager = ocp.CheckpointManager(self.directory, options=options)
        self.every = every

    def latest_step(self) -> int | None:
        return self.manager.latest_step()

    def save(self, step: int, state, data_position: int, force: bool = False) -> bool:
        """Start saving (returns once the arrays are copied off the devices). `force` saves
        off the interval: at the last step, or when the run stops early."""
        if not force and step % self.every:
            return False
        return self.manager.save(step, args=ocp.args.Composite(
            state=ocp.args.StandardSave(state), data=ocp.args.JsonSave({"position": data_position})),
            force=force)

    def restore(self, step: int, like) -> tuple[object, int]:
        """The state at `step` in the shardings of `like`, and the data position."""
        abstract = jax.tree.map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=a.sharding), like)
        restored = self.manager.restore(step, args=ocp.args.Composite(
            state=ocp.args.StandardRestore(abstract), data=ocp.args.JsonRestore()))
        return restored["state"], int(restored["data"]["position"])

    def close(self) -> None:
        self.manager.wait_until_finished()
        self.manager.close()
