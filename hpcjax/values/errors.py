"""One exception hierarchy for everything hpcjax reports to a user.

Every error carries the message (what is wrong, with the bad value) and a hint
(what would be valid, or what to do). The CLI prints both; Python callers get
them as attributes.
"""

from __future__ import annotations


class HpcjaxError(Exception):
    """Base of every error hpcjax raises on purpose."""

    exit_code = 1

    def __init__(self, message: str, hint: str = "", *, field: str | tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        # The option(s) the message names by their Python names (gpus_per_process): the CLI
        # names them as the user wrote them (--gpus-per-process, or a profile's key).
        self.fields = (field,) if isinstance(field, str) else tuple(field)

    def __str__(self) -> str:
        return f"{self.message}\nhint: {self.hint}" if self.hint else self.message


class UsageError(HpcjaxError):
    """Bad input from the user: nothing was written or submitted."""

    exit_code = 2


class SpecError(UsageError):
    """A job spec field holds a value that cannot be valid."""


class SlurmNotFound(HpcjaxError):
    """SLURM's commands are not installed on this machine."""


class SubmitError(HpcjaxError):
    """SLURM refused the job, or accepted a job that can never start."""


class JobFailed(HpcjaxError):
    """A submitted job ended in a state other than COMPLETED."""


class LayoutError(HpcjaxError):
    """What SLURM started does not match the layout, or cannot be mapped to JAX."""


class ConfigError(UsageError):
    """A training configuration holds a value that cannot be valid."""
