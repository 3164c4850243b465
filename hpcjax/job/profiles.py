"""Site profiles: a cluster's job defaults in one TOML file, by name.

    [profiles.ibex]
    description = "KAUST Ibex A100 nodes"
    constraint = "a100"
    modules = ["dl", "jax/23.10-sif"]
    runtime = "singularity"
    image = "$JAX_IMAGE"

    [profiles.ibex-debug]
    extends = "ibex"
    partition = "debug"
    modules = { append = ["cuda/12.2"] }   # a plain value replaces the parent's

The file is `--profile-file`, else $HPCJAX_PROFILES, else `profiles.toml` in the
user's configuration directory ($XDG_CONFIG_HOME/hpcjax, ~/.config/hpcjax).
Precedence: the command line > the profile > the profiles it extends > built-in
defaults. On the command line, list options add to the profile's, and --env
replaces a profile's variable of the same name.
"""

from __future__ import annotations

import os
from pathlib import Path

from hpcjax.containers import table as runtime_table
from hpcjax.values.errors import ConfigError, UsageError
from hpcjax.hosts.cluster import DEFAULT_REMOTE_DIR
from hpcjax.hosts.ssh import check_destination
from hpcjax.job.spec import Container, JobSpec, Layout
from hpcjax.job.walltime import UNLIMITED
from hpcjax.values.validate import read_text

PROFILES_ENV = "HPCJAX_PROFILES"
# Where the cluster is, when hpcjax runs elsewhere (a laptop): its login node as an SSH
# destination, the directory there that holds what hpcjax ships, the Python of its nodes.
CLUSTER_KEYS = ("host", "remote_dir", "ssh_options", "python", "ship_limit_mb")
INTS = ("nodes", "gpus_per_node", "gpus_per_process", "cpus_per_task", "requeue", "ship_limit_mb", "spares",
        "avoid_failed_hours")
POSITIVE = ("ship_limit_mb",)  # the others have their own checks, with their own hints, in the spec
STRS = ("time", "job_name", "partition", "account", "qos", "constraint", "gpu_type", "mem", "output_dir", "runtime",
        "image", "template", "host", "remote_dir", "python", "on")
BOOLS = ("exclusive", "retry_failed", "cleanenv", "bind_hpcjax", "preflight")
LISTS = ("modules", "binds", "container_flags", "sbatch", "prologue", "epilogue", "ssh_options", "exclude")
TABLES = ("env",)
OPTIONS = INTS + STRS + BOOLS + LISTS + TABLES
META = ("description", "extends")


def add_section(path: Path, name: str, text: str) -> None:
    """Append a profile's section (`hpcjax site`): written only if the file with it loads, at once."""
    old = read_text(path, "the profiles file", ConfigError) if path.is_file() else ""
    trial = path.with_name(f".{path.name}.{os.getpid()}.new")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        trial.write_text(old + ("\n" if old and not old.endswith("\n") else "") + text)
        if name in load(trial)[1]:  # (ConfigError if the text would not load)
            os.replace(trial, path)
    except OSError as error:
        raise ConfigError(f"cannot write the profiles file {str(path)!r}: {error.strerror or error}",
                          "name a file you can write with --profile-file (or $HPCJAX_PROFILES)") from None
    finally:
        trial.unlink(missing_ok=True)


def default_path(environ=os.environ) -> Path:
    if environ.get(PROFILES_ENV):
        return Path(environ[PROFILES_ENV]).expanduser()
    base = environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "hpcjax" / "profiles.toml"


# The files read in this process, as they were when read: a submission asks for its profile, its
# cluster and its defaults, which read the same file up to three times (issue 64).
_READ: dict[tuple, tuple[Path, dict[str, dict]]] = {}


def load(path: str | Path | None = None) -> tuple[Path, dict[str, dict]]:
    """The profiles of a file, checked: known keys of the right types, no cycles. Read once per
    process while the file is unchanged (its size and modification time)."""
    path = Path(path).expanduser() if path else default_path()
    if not path.is_file():
        raise ConfigError(f"no profile file at {path}",
                          f"write one (see profiles/examples.toml in hpcjax's repository), point "
                          f"{PROFILES_ENV} at it, or pass --profile-file")
    try:
        seen = path.stat()
        key = (str(path.resolve()), seen.st_mtime_ns, seen.st_size)
    except OSError:
        key = None  # read_text says what is wrong with it
    if key not in _READ:
        loaded = _read(path)
        if key is None:
            return loaded
        _READ[key] = loaded
    import copy  # a caller's change to what it was given never reaches the next caller

    return _READ[key][0], copy.deepcopy(_READ[key][1])


def _read(path: Path) -> tuple[Path, dict[str, dict]]:
    import tomllib  # only when a profile file is read

    try:
        data = tomllib.loads(read_text(path, "profile file", ConfigError))
    except tomllib.TOMLDecodeError as err:
        raise ConfigError(f"{path} is not valid TOML: {err}", "fix the line it names") from None
    profiles = data.get("profiles")
    if not isinstance(profiles, dict) or set(data) - {"profiles"}:
        raise ConfigError(f"{path}: expected only [profiles.NAME] tables, found {', '.join(sorted(data)) or 'none'}",
                          "write each profile as a [profiles.NAME] table")
    for name, profile in profiles.items():
        _check(path, name, profile, profiles)
    for name in profiles:
        chain(path, name, profiles)  # raises on a cycle
    return path, profiles


def _check(path: Path, name: str, profile: object, profiles: dict) -> None:
    where = f"{path}, profile {name!r}"
    if not isinstance(profile, dict):
        raise ConfigError(f"{where} is not a table", f"write it as [profiles.{name}]")
    for key, value in profile.items():
        if key not in OPTIONS + META:
            raise ConfigError(f"{where}: unknown key {key!r}", f"valid keys: {', '.join(OPTIONS + META)}")
        check_value(key, _directive(value)[1] if key in LISTS + TABLES else value, f"{where}: {key}")
    parent = profile.get("extends")
    if parent is not None and parent not in profiles:
        raise ConfigError(f"{where} extends unknown profile {parent!r}", f"profiles in the file: {', '.join(profiles)}")


def check_value(key: str, value, what: str, *, sequences=(list,), example: str = "") -> None:
    """A job option's value is of its kind (a profile's key, a keyword of ScalingConfig): else ConfigError."""
    expected = ("an integer" if key in INTS else "true or false" if key in BOOLS else
                "a list of strings" if key in LISTS else "a table (a dict) of strings" if key in TABLES else "a string")
    ok = (isinstance(value, int) and not isinstance(value, bool) if key in INTS else
          isinstance(value, bool) if key in BOOLS else
          isinstance(value, sequences) and all(isinstance(v, str) for v in value) if key in LISTS else
          isinstance(value, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in value.items())
          if key in TABLES else isinstance(value, str))
    if not ok:
        raise ConfigError(f"{what} must be {expected}, got {value!r}", f"e.g. {example or _example(key)}")
    if key in POSITIVE and value < 1:
        raise ConfigError(f"{what} must be at least 1, got {value!r}", f"e.g. {example or _example(key)}")
    if key == "host":  # "" would mean this machine without a word; "@" gives ssh's usage text
        try:
            check_destination(value, "host")
        except UsageError as bad:
            raise ConfigError(f"{what}: {bad.message}", f"{bad.hint}; leave host out to run on this machine") from None
    if key == "remote_dir" and not value.strip():
        raise ConfigError(f"{what} is empty", f'name a directory there, e.g. remote_dir = "$SCRATCH/hpcjax", or leave '
                          f"the key out for the default ({DEFAULT_REMOTE_DIR})")


def _example(key: str) -> str:
    return {"nodes": "nodes = 2", "modules": 'modules = ["dl"] or modules = { append = ["dl"] }',
            "env": 'env = { XLA_FLAGS = "..." }', "exclusive": "exclusive = true",
            "host": 'host = "me@login.example.org"', "ssh_options": 'ssh_options = ["-F", "~/.ssh/hpc_config"]',
            "sbatch": 'sbatch = ["--licenses=scratch"]', "ship_limit_mb": "ship_limit_mb = 500"}.get(
                key, f'{key} = "..."' if key in STRS else f"{key} = 1")


def _directive(value) -> tuple[str, object]:
    """A list option's value: ("replace", items) for a plain value, ("append", items) for {append = ...}."""
    if isinstance(value, dict) and len(value) == 1 and next(iter(value)) in ("append", "replace"):
        return next(iter(value.items()))
    return "replace", value


def chain(path: Path, name: str, profiles: dict) -> list[str]:
    """[name, its parent, ...], refusing a cycle."""
    seen: list[str] = []
    while name is not None:
        if name in seen:
            raise ConfigError(f"{path}: profiles extend each other in a cycle: {' -> '.join(seen + [name])}",
                              "remove one of the `extends` keys")
        seen.append(name)
        name = profiles[name].get("extends")
    return seen


def resolve(name: str, path: str | Path | None = None) -> tuple[dict, dict[str, str]]:
    """The merged options of profile `name` and, for each, which profile set it."""
    path, profiles = load(path)
    if name not in profiles:
        raise ConfigError(f"unknown profile {name!r} in {path}",
                          f"profiles there: {', '.join(profiles) or 'none'}")
    values: dict = {}
    sources: dict[str, str] = {}
    for profile_name in reversed(chain(path, name, profiles)):
        for key, raw in profiles[profile_name].items():
            if key in META:
                continue
            how, value = _directive(raw) if key in LISTS + TABLES else ("replace", raw)
            if key == "template":
                value = str((path.parent / value).resolve())  # relative to the profile file
            values[key] = merge_value(key, values.get(key), value, how)
            sources[key] = profile_name if how == "replace" or key not in sources else f"{sources[key]} + {profile_name}"
    return values, sources


def merge_value(key: str, old, new, how: str):
    if how == "replace" or old is None:
        return dict(new) if key in TABLES else (list(new) if key in LISTS else new)
    return {**old, **new} if key in TABLES else list(old) + list(new)


def with_overrides(values: dict, overrides: dict) -> dict:
    """The command line (or keyword arguments) over a profile: scalars replace, lists add,
    env entries replace the profile's of the same name."""
    merged = dict(values)
    for key, value in overrides.items():
        if value is None:
            continue
        if key not in OPTIONS:
            raise ConfigError(f"unknown job option {key!r}", f"valid options: {', '.join(OPTIONS)}")
        merged[key] = merge_value(key, merged.get(key), value, "append" if key in LISTS + TABLES else "replace")
    return merged


def build_spec(command, values: dict, defaults: dict | None = None):
    """A JobSpec from merged options; what none of them sets keeps `defaults`, then JobSpec's."""
    v = {**(defaults or {}), **values}
    if values.get("on") and "time" not in values:  # a job in a hold runs to the hold's end unless it asks less
        v["time"] = UNLIMITED
    layout = Layout(**{k: v[k] for k in ("nodes", "gpus_per_node", "gpus_per_process") if k in v})
    runtime = v.get("runtime") or (runtime_table.DEFAULT_WITH_IMAGE if v.get("image") else runtime_table.BARE)
    container = Container(runtime=runtime, image=v.get("image"), binds=tuple(v.get("binds", ())),
                          flags=tuple(v.get("container_flags", ())), cleanenv=bool(v.get("cleanenv")),
                          bind_hpcjax=v.get("bind_hpcjax", True))
    simple = {k: v[k] for k in SIMPLE if k in v}
    return JobSpec(command=command if isinstance(command, str) else tuple(command), layout=layout, container=container, modules=tuple(v.get("modules", ())),
                   env=tuple(v.get("env", {}).items()), sbatch_lines=tuple(v.get("sbatch", ())),
                   prologue=tuple(v.get("prologue", ())), epilogue=tuple(v.get("epilogue", ())),
                   exclude=tuple(v.get("exclude", ())), **simple)


SIMPLE = ("time", "job_name", "partition", "account", "qos", "constraint", "gpu_type", "cpus_per_task", "mem", "exclusive",
          "output_dir", "requeue", "retry_failed", "template", "preflight", "spares",
          "avoid_failed_hours", "on")


def values_of(spec: JobSpec) -> dict:
    """The job options that build `spec` again (build_spec's inverse), as JSON can keep them:
    what the catalog records so `hpcjax relaunch` submits the same job."""
    container = spec.container
    values = {**spec.layout.as_dict(), **{k: getattr(spec, k) for k in SIMPLE if getattr(spec, k) is not None},
              "runtime": container.runtime, "image": container.image, "binds": list(container.binds),
              "container_flags": list(container.flags), "cleanenv": container.cleanenv,
              "bind_hpcjax": container.bind_hpcjax, "modules": list(spec.modules), "env": dict(spec.env),
              "sbatch": list(spec.sbatch_lines), "prologue": list(spec.prologue), "epilogue": list(spec.epilogue),
              "exclude": list(spec.exclude)}
    return {k: v for k, v in values.items() if v is not None}


def job_spec(command, *, profile: str | None = None, profile_file: str | Path | None = None, **options):
    """For Python callers: `job_spec(["python", "train.py"], profile="ibex", nodes=2)`."""
    values = resolve(profile, profile_file)[0] if profile else {}
    return build_spec(command, with_overrides(values, options))
