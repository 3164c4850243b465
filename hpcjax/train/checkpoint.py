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

KEEP = 3  # checkpoints kept on disk


class Checkpoints:
    """Orbax's manager, made (and Orbax imported, ~0.2 s) only once a checkpoint is there to
    restore or one is saved: a run's first start does not wait for it before its first step."""

    def __init__(self, directory: Path, every: int) -> None:
        self.directory = Path(directory).resolve()
        self.every = every
        self._manager = None

    @property
    def manager(self):
        if self._manager is None:
            import orbax.checkpoint as ocp

            options = ocp.CheckpointManagerOptions(save_interval_steps=max(1, self.every), max_to_keep=KEEP,
                                                   enable_async_checkpointing=True)
            self._manager = ocp.CheckpointManager(self.directory, options=options)
        return self._manager

    def latest_step(self) -> int | None:
        if self._manager is None and not self._any_step():
            return None
        return self.manager.latest_step()

    def _any_step(self) -> bool:
        """A directory named by a number (Orbax's finished or unfinished step) is there."""
        try:
            return any(p.name.isdigit() for p in self.directory.iterdir())
        except OSError:
            return False

    def save(self, step: int, state, data_position: int, force: bool = False) -> bool:
        """Start saving (returns once the arrays are copied off the devices). `force` saves
        off the interval: at the last step, or when the run stops early."""
        import orbax.checkpoint as ocp

        if not force and step % self.every:
            return False
        return self.manager.save(step, args=ocp.args.Composite(
            state=ocp.args.StandardSave(state), data=ocp.args.JsonSave({"position": data_position})),
            force=force)

    def restore(self, step: int, like) -> tuple[object, int]:
        """The state at `step` in the shardings of `like` (arrays or ShapeDtypeStructs), and the data position."""
        import orbax.checkpoint as ocp

        abstract = jax.tree.map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=a.sharding), like)
        restored = self.manager.restore(step, args=ocp.args.Composite(
            state=ocp.args.StandardRestore(abstract), data=ocp.args.JsonRestore()))
        return restored["state"], int(restored["data"]["position"])

    def close(self) -> None:
        if self._manager is not None:
            self._manager.wait_until_finished()
            self._manager.close()
