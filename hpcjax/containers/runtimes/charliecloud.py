"""Charliecloud (ch-run 0.31): `ch-run -b SRC:DST -c $PWD IMAGE -- CMD`, unprivileged.

The image is an unpacked directory or a SquashFS file (not a .sif). A bind has no options
(`:rw` is what it is anyway; `:ro` is refused: ch-run 0.31 cannot mount read-only). ch-run wants $USER, binds only onto
targets that exist in the image, and binds the host's /etc/hosts only onto an existing file
(without it no node name resolves inside and the ranks cannot find the coordinator).
Under --cleanenv the coordinator wrapper cleans the environment to the names a rank needs
before ch-run starts.
"""

from __future__ import annotations

from hpcjax.containers.binds import LOG_DIR, binds_of, passed_names, python_path
from hpcjax.containers.table import Launch, Runtime, register
from hpcjax.protocol.contract import LOG_DIR_ENV
from hpcjax.values.errors import SpecError
from hpcjax.values.shellword import word

# What ch-run itself and a shell need when the environment is cleaned before it.
CH_RUN_KEEPS = ("PATH", "USER", "HOME", "LANG", "TERM")


@register
class Charliecloud(Runtime):
    name = "charliecloud"
    order = 30
    program = "ch-run"
    inside_marks = ("CH_RUNNING",)
    image_help = "an unpacked image directory or a .sqfs file"

    def check(self, container) -> None:
        super().check(container)
        if "://" in container.image:
            raise SpecError(f"Charliecloud runs an unpacked image, not {container.image!r}",
                            "convert it first (ch-convert) and give the directory or .sqfs file")
        if container.image.lower().endswith((".sif", ".simg")):
            raise SpecError(f"Charliecloud cannot run the Apptainer/Singularity image {container.image!r}: it "
                            "runs an unpacked directory or a SquashFS (.sqfs) file",
                            f"convert it: ch-convert {container.image} ./jax-image (then --image ./jax-image), "
                            "or run it with --runtime apptainer")

    def check_bind(self, bind) -> None:
        if bind.options == "ro":
            raise SpecError(f"ch-run's -b has no read-only mode: bind {bind.source}:{bind.inside}:ro cannot be "
                            "made with Charliecloud", "drop :ro (the bind is as writable as the host path "
                            "is to you), or use --runtime apptainer or pyxis, which mount it read-only")

    def launch(self, spec, image_word: str) -> Launch:
        container = spec.container
        found = binds_of(spec)
        binds = "".join(f" -b {b.word(options=False)}" for b in found)
        pythonpath = python_path(spec)
        env = f" --set-env={word('PYTHONPATH=' + pythonpath)}" if pythonpath else ""
        targets = "".join(f' "$hpcjax_image"{word(b.inside)}' for b in found)
        prepare = ('export USER="${USER:-$(id -un)}"  # ch-run refuses to start without it',
                   f"hpcjax_image={image_word}",
                   "# ch-run 0.31 binds only onto targets that exist in the image, and the host's",
                   "# /etc/hosts only onto an existing file (else no node name resolves inside).",
                   f'if [ -d "$hpcjax_image" ] && ! {{ mkdir -p{targets} "$hpcjax_image$PWD" '
                   f'"$hpcjax_image${LOG_DIR_ENV}" && touch "$hpcjax_image/etc/hosts"; }}; then',
                   '  echo "hpcjax: cannot create the bind targets in the image $hpcjax_image;'
                   ' add them to it (mkdir -p) or make it writable" >&2',
                   "  exit 2",
                   "fi")
        keep = passed_names(spec) + CH_RUN_KEEPS if container.cleanenv else ()
        words = (f'{self.program} -b "$PWD" -c "$PWD" -b {LOG_DIR}{binds}{env}{self.quoted_flags(container)}'
                 ' "$hpcjax_image" --')
        return Launch(words=words, prepare=prepare, keep_only=keep, program=self.program)
