"""A stage of the training loop: one concern (the record, the profiler, the pace captures,
the hang watch's progress) with hooks around every step. The loop calls the stages' `before_step` in
order, takes the step, then their `after_step` in reverse order, like nested `with`
blocks: a stage that starts something before the step ends it after the stages inside it.
"""

from __future__ import annotations


class Stage:
    def before_step(self, step: int) -> None:
        """Just before `step` is dispatched."""

    def after_step(self, step: int, learning_rate: float, metrics) -> None:
        """Just after `step` was dispatched (its metrics may not be computed yet)."""

    def close(self) -> None:
        """The run ended (or raised): let go of what the stage holds."""
