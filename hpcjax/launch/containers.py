"""How every rank enters its container, per runtime: the words before the command, the
srun options (pyxis), the script lines that prepare the launch, and what each runtime
needs to see the same paths and variables as a bare rank.

    apptainer / singularity  `<rt> exec --nv [--cleanenv] --bind ... IMAGE CMD`
    charliecloud             `ch-run -b ... -c $PWD IMAGE -- CMD`   (ch-run 0.31)
    pyxis                    `srun --container-image=IMAGE --container-mounts=... CMD`
    none                     `CMD`

hpcjax inside any JAX image: unless the image ships hpcjax (`bind_hpcjax=False`), the
launch binds this hpcjax's package directory into the container at HPCJAX_TARGET and puts
it first on PYTHONPATH, so a site's stock image needs no rebuild. The working directory and
the log directory (where a rank leaves the stop marker) are bound in every runtime.
"""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass
from pathlib import Path

from hpcjax import contract
from hpcjax.errors import UsageError

RUNTIMES = ("apptainer", "singularity", "charliecloud", "pyxis", "none")
PROGRAMS = {"apptainer": "apptainer", "singularity": "singularity", "charliecloud": "ch-run"}
HPCJAX_TARGET = "/opt/hpcjax/lib"  # inside the container: <this>/hpcjax is hpcjax's package
# What a rank needs from the job's environment when the container starts clean.
PASSED_NAMES = ("SLURM_*", "SLURMD_NODENAME", "JAX_*", "XLA_*", "NCCL_*", "CUDA_VISIBLE_DEVICES",
                "HPCJAX_*", "PYTHONUNBUFFERED", "OMPI_*", "PMIX_*", "TF_CPP_*")
# What ch-run itself and a shell need when the environment is cleaned before it.
CH_RUN_KEEPS = ("PATH", "USER", "HOME", "LANG", "TERM")


BIND_SOURCE_ENV = "HPCJAX_BIND_SOURCE"  # the hpcjax package to bind, as the compute nodes see it


def hpcjax_package_dir() -> Path:
    """The hpcjax package bound into containers: this one, unless $HPCJAX_BIND_SOURCE names
    the path the compute nodes see (a login node may mount the venv elsewhere)."""
    return Path(os.environ.get(BIND_SOURCE_ENV) or Path(__file__).resolve().parent.parent)


@dataclass(frozen=True)
class Launch:
    words: str  # shell text between the coordinator wrapper and the command ('' for none/pyxis)
    srun_options: str  # extra srun options (pyxis), each starting with a space
    prepare: tuple[str, ...]  # script lines before srun
    cleanenv_prefixes: tuple[str, ...]  # variables exported under these prefixes reach the container
    keep_only: tuple[str, ...]  # non-empty: the wrapper cleans the environment to these names


# Caches a rank writes, named by the job's --env: bound in place when they exist here.
CACHE_VARIABLES = ("HPCJAX_COMPILE_CACHE", "JAX_COMPILATION_CACHE_DIR")


def binds_of(spec) -> list[tuple[str, str]]:
    """(source, target) of every bind: the user's, the caches the job's --env names, and
    hpcjax's own package unless the image ships it."""
    pairs = []
    for bind in spec.container.binds:
        source, _, rest = bind.partition(":")
        pairs.append((source, rest.split(":")[0] or source))
    bound = {s for s, _ in pairs}
    for name in CACHE_VARIABLES:
        cache = dict(spec.env).get(name)
        if cache and cache.startswith("/") and Path(cache).is_dir() and cache not in bound:
            pairs.append((cache, cache))
    if spec.container.bind_hpcjax and spec.container.runtime != "none":
        pairs.append((str(hpcjax_package_dir()), f"{HPCJAX_TARGET}/hpcjax"))
    return pairs


def python_path(spec) -> str:
    """PYTHONPATH inside the container: hpcjax's bound package first, then the user's own."""
    user = dict(spec.env).get("PYTHONPATH")
    first = [HPCJAX_TARGET] if spec.container.bind_hpcjax else []
    return ":".join(first + ([user] if user else []))


def passed_names(spec) -> tuple[str, ...]:
    return PASSED_NAMES + tuple(key for key, _ in spec.env)


def launch(spec, image_word: str) -> Launch:
    container = spec.container
    runtime = container.runtime
    quoted_flags = "".join(f" {shlex.quote(f)}" for f in container.flags)
    pythonpath = python_path(spec)
    if runtime in ("apptainer", "singularity"):
        prefixes = contract.CLEANENV_PREFIXES[runtime]
        user = {b.partition(":")[0] for b in container.binds}
        binds = ' --bind "$HPCJAX_LOG_DIR"' + "".join(f" --bind {shlex.quote(b)}" for b in container.binds)
        binds += "".join(f" --bind {shlex.quote(s + ':' + t)}" for s, t in binds_of(spec) if s not in user)
        prepare = [f"export {p}PYTHONPATH={shlex.quote(pythonpath)}" for p in prefixes] if pythonpath else []
        library = dict(spec.env).get("LD_LIBRARY_PATH")
        if library:  # Apptainer never passes the host's LD_LIBRARY_PATH; the prefixed form it does
            prepare += [f"export {p}LD_LIBRARY_PATH={shlex.quote(library)}" for p in prefixes]
        clean = " --cleanenv" if container.cleanenv else ""
        return Launch(f"{runtime} exec --nv{clean}{binds}{quoted_flags} {image_word}", "", tuple(prepare),
                      prefixes, ())
    if runtime == "charliecloud":
        pairs = binds_of(spec)
        binds = "".join(f" -b {shlex.quote(s + ':' + t)}" for s, t in pairs)
        env = f" --set-env={shlex.quote('PYTHONPATH=' + pythonpath)}" if pythonpath else ""
        prepare = ['export USER="${USER:-$(id -un)}"  # ch-run refuses to start without it',
                   f"hpcjax_image={image_word}",
                   "# ch-run 0.31 binds only onto targets that exist in the image, and the host's",
                   "# /etc/hosts only onto an existing file (else no node name resolves inside).",
                   'if [ -d "$hpcjax_image" ] && ! { mkdir -p' + "".join(f' "$hpcjax_image"{shlex.quote(t)}' for _, t in pairs)
                   + ' "$hpcjax_image$PWD" "$hpcjax_image$HPCJAX_LOG_DIR" && touch "$hpcjax_image/etc/hosts"; }; then',
                   '  echo "hpcjax: cannot create the bind targets in the image $hpcjax_image;'
                   ' add them to it (mkdir -p) or make it writable" >&2',
                   "  exit 2",
                   "fi"]
        keep = passed_names(spec) + CH_RUN_KEEPS if container.cleanenv else ()
        words = f'ch-run -b "$PWD" -c "$PWD" -b "$HPCJAX_LOG_DIR"{binds}{env}{quoted_flags} "$hpcjax_image" --'
        return Launch(words, "", tuple(prepare), (), keep)
    if runtime == "pyxis":
        mounts = ",".join(f"{s}:{t}" for s, t in binds_of(spec))
        options = (f" \\\n  --container-image={image_word} --container-workdir=\"$PWD\""
                   f" --container-mounts=\"$PWD:$PWD,$HPCJAX_LOG_DIR:$HPCJAX_LOG_DIR\""
                   f"{',' + shlex.quote(mounts) if mounts else ''}"
                   + (" --container-env=PYTHONPATH" if pythonpath else "") + quoted_flags)
        prepare = [f"export PYTHONPATH={shlex.quote(pythonpath)}  # for the container: pyxis passes the job's"
                   " environment"] if pythonpath else []
        return Launch("", options, tuple(prepare), (), ())
    return Launch("", "", (), (), ())


def check_before_submit(spec) -> None:
    """What only the submitting machine can tell: every bind source exists (a source with a
    $VAR is the job's to expand)."""
    for source, _ in binds_of(spec):
        if "$" not in source and not Path(source).exists():
            raise UsageError(f"bind source {source!r} does not exist on this machine",
                             "fix the path or create it; a path that exists only on the compute nodes can be "
                             "written with a variable the job sets, e.g. --bind '$SCRATCH/data:/data'")
