"""A job's environment variables: names and values as SLURM and bash take them, and the knobs
hpcjax reads from them on every rank (timeouts, the preflight's floors), checked where the job is
made instead of on the ranks."""

from __future__ import annotations

import re

from hpcjax.protocol import contract, timeouts
from hpcjax.values.errors import ConfigError, SpecError
from hpcjax.values.validate import require_utf8

ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def check_env_pair(key: str, value: str) -> None:
    if not isinstance(key, str) or not ENV_NAME.fullmatch(key):
        raise SpecError(f"invalid environment variable name {key!r}",
                        "names are letters, digits and _, not starting with a digit: --env KEY=VALUE")
    if key in contract.LAYOUT_ENV:
        raise SpecError(f"{key} is set by hpcjax itself from the layout",
                        "use --nodes, --gpus-per-node and --gpus-per-process instead")
    if not isinstance(value, str) or "\0" in value:
        raise SpecError(f"environment value for {key} must be a string without NUL bytes",
                        "pass the value as text: --env KEY=VALUE")
    require_utf8(f"the value of --env {key}", value, SpecError)


def check_timeouts(env: dict[str, str]) -> None:
    """The job's timeouts (hang watch, start-up, heartbeat) and the preflight's floors are read on
    every rank: a bad one is refused here, not there."""
    try:
        timeouts.check_job_environment(env)
        if any(name.startswith("HPCJAX_PREFLIGHT_") for name in env):  # imported only then: render's path
            from hpcjax.protocol.preflight_rules import Floors

            Floors.from_env(env)
    except ConfigError as error:
        raise SpecError(f"--env {error.message}", error.hint, field="env") from None


def parse_env_assignment(text: str) -> tuple[str, str]:
    """'KEY=VALUE' -> (KEY, VALUE); the value may be empty and may contain '='."""
    key, sep, value = text.partition("=")
    if not sep:
        raise SpecError(f"malformed --env {text!r}: no '='", "write --env KEY=VALUE")
    check_env_pair(key, value)
    return key, value
