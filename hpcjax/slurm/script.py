"""Render a JobSpec into sbatch text: a pure function, no subprocess, no JAX."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from functools import lru_cache
from pathlib import Path

import jinja2
from jinja2.sandbox import SandboxedEnvironment

from hpcjax import __version__
from hpcjax.protocol import contract, scriptnames, timeouts
from hpcjax.values import shellword
from hpcjax.protocol.statuses import signal_words
from hpcjax.values.errors import SpecError
from hpcjax.containers import binds
from hpcjax.job.spec import JobSpec

TEMPLATE = "sbatch.sh.j2"


def template_dir() -> Path:
    """Inside a wheel the templates are the package hpcjax/templates; in a source
    checkout they are the top-level templates/ beside hpcjax/."""
    package = Path(__file__).resolve().parent.parent  # hpcjax/
    for candidate in (package / "templates", package.parent / "templates"):
        if (candidate / TEMPLATE).is_file():
            return candidate
    raise FileNotFoundError(f"{TEMPLATE} not found beside {package}; reinstall hpcjax")


@lru_cache(maxsize=8)
def _environment(site_dir: str | None = None) -> jinja2.Environment:
    """The packaged template, and a site's directory first when a site template is used
    (it extends the packaged one by name: {% extends "sbatch.sh.j2" %})."""
    dirs = ([site_dir] if site_dir else []) + [str(template_dir())]
    # A site's template is the site's text, run at `render` on a login node or a laptop: in Jinja's
    # sandbox, which refuses what reaches past the values (`cycler.__init__.__globals__.os`).
    kind = SandboxedEnvironment if site_dir else jinja2.Environment
    env = kind(
        loader=jinja2.ChoiceLoader([jinja2.FileSystemLoader(dirs[0])] + [
            jinja2.PrefixLoader({"hpcjax": jinja2.FileSystemLoader(str(template_dir()))})] +
            [jinja2.FileSystemLoader(d) for d in dirs[1:]]),
        undefined=jinja2.StrictUndefined,
        autoescape=False,  # shell, not HTML: every user string goes through |q instead
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        bytecode_cache=CompiledTemplates.if_usable(),
    )
    env.filters["q"] = lambda value: shellword.literal(str(value))
    env.filters["word"] = shellword.word  # $NAME expands on the node, nothing else
    return env


class CompiledTemplates(jinja2.BytecodeCache):
    """Compiled templates kept in the user's cache directory: compiling the packaged template
    is two thirds of `hpcjax render`'s own time. Keyed by the template's text (jinja's checksum),
    so an edited site template is compiled again. A cache that cannot be read or written is no
    cache, never an error; one the user does not own is not used (it would run its code)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    @classmethod
    def if_usable(cls) -> CompiledTemplates | None:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        directory = Path(base) / "hpcjax" / "templates"
        try:
            directory.mkdir(parents=True, exist_ok=True, mode=0o700)
            if directory.stat().st_uid != os.getuid():
                return None
        except OSError:
            return None
        return cls(directory)

    def load_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        try:
            with open(self.directory / f"{bucket.key}.cache", "rb") as f:
                bucket.load_bytecode(f)
        except (OSError, EOFError, ValueError):
            bucket.reset()

    def dump_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        written = None
        try:
            with tempfile.NamedTemporaryFile("wb", dir=self.directory, delete=False) as f:
                written = f.name
                bucket.write_bytecode(f)
            os.replace(written, self.directory / f"{bucket.key}.cache")
        except OSError:
            with contextlib.suppress(OSError, TypeError):
                os.unlink(written)


def image_word(spec: JobSpec) -> str:
    """The image as one shell word; $VAR images expand inside the job, and fail
    loudly there if the module that should set them was not loaded."""
    var = spec.container.image_env_var
    if var is None:
        return shellword.literal(spec.container.image or "")
    return f'"${{{var}:?is not set: load the module that provides the image}}"'


def render_sbatch(spec: JobSpec, *, check_syntax: bool = True, hold: bool = False) -> str:
    """The sbatch script for spec. What `hpcjax render` prints is what `submit` submits.
    A script that is not valid bash (a broken prologue, a site template) is refused: always
    before a submission, for `hpcjax render` with --check (a subprocess it otherwise spares).
    `hold`: the script of a held allocation (`hpcjax hold`), whose launch is the hold's agent."""
    if not spec.template:
        text = _render(_environment().get_template(TEMPLATE), spec, hold)
    else:  # a site's template: whatever is wrong in it (syntax, a name no one gives) is its to fix
        site = Path(spec.template).resolve()
        try:
            text = _render(_environment(str(site.parent)).get_template(site.name), spec, hold)
        except (jinja2.TemplateError, UnicodeDecodeError) as err:  # SecurityError is a TemplateError
            said = f"{type(err).__name__}: {err}" if isinstance(err, jinja2.UndefinedError) else str(err)
            raise SpecError(f"site template {spec.template}: {said}",
                            'a site template starts with {% extends "hpcjax/sbatch.sh.j2" %} and overrides '
                            "its blocks (directives, prologue, launch, srun_options, epilogue) using the "
                            "names the packaged template uses (spec, layout, container, ...); save it as UTF-8"
                            ) from None
        if f"\n# Rendered by hpcjax {__version__}. " not in text:  # the packaged template's line, outside its blocks
            raise SpecError(f"site template {spec.template} does not extend hpcjax's script: what it renders is not "
                            "a script hpcjax wrote, and would go to sbatch as it is",
                            'a site template starts with {% extends "hpcjax/sbatch.sh.j2" %} and overrides its blocks '
                            "(directives, prologue, launch, srun_options, epilogue): the site profiles page of the docs shows one")
    if check_syntax:
        check_bash_syntax(text, spec)
    return text


def check_bash_syntax(text: str, spec: JobSpec) -> None:
    if not (spec.prologue or spec.epilogue or spec.template) or shutil.which("bash") is None:
        return  # the packaged template alone is tested to be valid
    import subprocess  # only here: rendering itself starts no process

    result = subprocess.run(["bash", "-n"], input=text, capture_output=True, text=True)
    if result.returncode != 0:
        said = result.stderr.strip().replace("bash: ", "")
        raise SpecError(f"the rendered script is not valid bash: {said}",
                        "check the prologue and epilogue lines" + (f" and the site template {spec.template}"
                                                                    if spec.template else ""))


def _render(template, spec: JobSpec, hold: bool = False) -> str:
    image = image_word(spec)
    launch = spec.container.runtime_rules.launch(spec, image)
    names = scriptnames.script_names(spec.output_dir, array=bool(spec.array), in_hold=bool(spec.on), hold=hold,
                                  retry_failed=spec.retry_failed, preflight=spec.preflight,
                                  gpus_per_process=spec.layout.gpus_per_process)
    return template.render(
        **names,
        spec=spec,
        layout=spec.layout,
        container=spec.container,
        image=image,
        layout_env=spec.layout.env(),
        rank_log_word=_log_word(names["rank_log"], spec), preflight_log_word=_log_word(names["preflight_log"], spec),
        cleanenv_prefixes=launch.cleanenv_prefixes,
        coordinator_wrapper=contract.coordinator_wrapper(
            launch.cleanenv_prefixes, binds.passed_names(spec) if spec.container.cleanenv else (),
            launch.keep_only),
        launch=launch,
        hpcjax_target=binds.HPCJAX_TARGET,
        nccl_flag=timeouts.NCCL_TIMEOUT_FLAG,
        dependency=",".join(f"after{when}:{job}" for job, when in spec.after),
        nccl_timeout=timeouts.HangSettings.from_env(dict(spec.env)).nccl_timeout_s,
        preflight_command=(spec.hpcjax_python(), "-m", "hpcjax", "preflight")
        + (("--spares", str(spec.spares)) if spec.spares else ()),
        exit_hook="" if spec.container.in_container else binds.exit_hook_dir(spec),
        exit_guard_env=timeouts.EXIT_GUARD_ENV, in_hold_options=in_hold_options(spec),
        signal_statuses=sorted((words, 128 + number) for words, number in signal_words().items()),
        # A typed GRES's job must ask srun for typed GPUs too: SLURM 22.05 refused a step's untyped
        # --gpus-per-task in an a100-typed job ("Invalid GRES specification (with and without type
        # identification)", seen on the dev cluster's a100 partition).
        gpus=f"{spec.gpu_type}:" if spec.gpu_type else "",
        masks_per_task=gpu_masks(spec.layout.tasks_per_node, spec.layout.gpus_per_process),
        version=__version__,
    )

def gpu_masks(tasks_per_node: int, gpus_per_task: int) -> str:
    """srun's --gpu-bind=mask_gpu value that gives each task of a node its own GPUs, in order: the
    binding for releases before 21.08, which have no --gpu-bind=per_task (docs/slurm-versions.md)."""
    one_task = (1 << gpus_per_task) - 1
    return ",".join(hex(one_task << (task * gpus_per_task)) for task in range(tasks_per_node))


def in_hold_options(spec: JobSpec) -> str:
    """A job in a hold has no sbatch of its own: what it asked of sbatch (its time limit, the warning
    before it, the nodes it must not use) goes on its steps' srun lines, which are named after it
    (HOLD.sN) so that its cancel is theirs (templates/hold-agent.sh.j2)."""
    if not spec.on:
        return ""
    words = ['--job-name="${%s}"' % contract.JOB_KEY_ENV]  # the agent's cancel finds its steps by that name
    words += [] if spec.time_seconds is None else [f"--time={spec.time}"]
    if spec.warning_s:
        words.append(f"--signal={contract.WARNING_SIGNAL}@{spec.warning_s}")
    if spec.exclude:
        words.append("--exclude=" + shellword.literal(",".join(spec.exclude)))
    return "".join(f" {word}" for word in words)


def _log_word(pattern: str, spec: JobSpec) -> str:
    """srun's --output as one shell word: SLURM fills %j and %t; in a hold, %j is the job's own
    name (HOLD.sN, which srun cannot know: the hold's agent exports it)."""
    if not spec.on:
        return shellword.literal(pattern)
    head, _, tail = pattern.partition("%j")
    return shellword.literal(head) + f'"${{{contract.JOB_KEY_ENV}}}"' + shellword.literal(tail)
