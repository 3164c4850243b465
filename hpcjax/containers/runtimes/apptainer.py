"""Apptainer and Singularity: `<runtime> exec --nv [--cleanenv] --bind ... IMAGE CMD`.

Both pass a variable exported under their prefix (APPTAINERENV_NAME) into the container
without the prefix, even with --cleanenv; both never pass the host's LD_LIBRARY_PATH (its
prefixed copy they do); both always pass proxy variables (the coordinator wrapper keeps the
coordinator out of the proxy). A bind's option (ro, rw) is Apptainer's own: SRC:DST:ro.
"""

from __future__ import annotations

from hpcjax.containers.binds import LOG_DIR, binds_of, python_path
from hpcjax.containers.table import Launch, Runtime, register
from hpcjax.values.shellword import word


@register
class Apptainer(Runtime):
    name = "apptainer"
    order = 10
    program = "apptainer"
    inside_marks = ("APPTAINER_CONTAINER",)
    cleanenv_prefixes = ("APPTAINERENV_",)
    image_help = "a .sif file, a docker:// or library:// URI, or $VAR"

    def normalize(self, container) -> dict:
        """`--container-flag --cleanenv` (or -e) is Apptainer's own spelling of cleanenv."""
        if "--cleanenv" in container.flags or "-e" in container.flags:
            return {"cleanenv": True, "flags": tuple(f for f in container.flags if f not in ("--cleanenv", "-e"))}
        return {}

    def launch(self, spec, image_word: str) -> Launch:
        container = spec.container
        prefixes = self.cleanenv_prefixes
        binds = f" --bind {LOG_DIR}" + "".join(f" --bind {b.word()}" for b in binds_of(spec))
        pythonpath = python_path(spec)
        prepare = [f"export {p}PYTHONPATH={word(pythonpath)}" for p in prefixes] if pythonpath else []
        library = dict(spec.env).get("LD_LIBRARY_PATH")
        if library:  # Apptainer never passes the host's LD_LIBRARY_PATH; the prefixed form it does
            prepare += [f"export {p}LD_LIBRARY_PATH={word(library)}" for p in prefixes]
        clean = " --cleanenv" if container.cleanenv else ""
        return Launch(words=f"{self.program} exec --nv{clean}{binds}{self.quoted_flags(container)} {image_word}",
                      prepare=tuple(prepare), cleanenv_prefixes=prefixes, program=self.program)


@register
class Singularity(Apptainer):
    """SingularityCE, and Apptainer installed under its old name: reads both prefixes."""

    name = "singularity"
    order = 20
    program = "singularity"
    inside_marks = ("SINGULARITY_CONTAINER",)
    cleanenv_prefixes = ("SINGULARITYENV_", "APPTAINERENV_")
