"""Pyxis, NVIDIA's srun plugin (enroot underneath): the image and the mounts go on the srun
line (`srun --container-image=IMAGE --container-mounts=SRC:DST,... CMD`). Pyxis passes the
job's environment into the container and has no clean mode. A bind's option (ro, rw) is
written as pyxis takes it: SRC:DST:ro."""

from __future__ import annotations

from hpcjax.containers.binds import LOG_DIR, binds_of, python_path
from hpcjax.containers.table import Launch, Runtime, register
from hpcjax.values.errors import SpecError
from hpcjax.values.shellword import word


@register
class Pyxis(Runtime):
    name = "pyxis"
    order = 40
    inside_marks = ("PYXIS_VERSION", "ENROOT_ROOTFS")
    has_cleanenv = False
    image_help = "a registry image such as nvcr.io#nvidia/jax:24.04-py3, or a .sqsh file"

    def check(self, container) -> None:
        super().check(container)
        for bind in container.binds:
            if "," in bind:
                raise SpecError(f"bind {bind!r} contains ',', which pyxis's --container-mounts splits on",
                                "bind a path without commas (a link to it)")

    def image_is_local_file(self, image: str | None) -> bool:
        # pyxis names registry images as registry#image:tag; only a .sqsh file is local
        return super().image_is_local_file(image) and image.endswith(".sqsh")

    def launch(self, spec, image_word: str) -> Launch:
        mounts = ",".join(f"{b.source}:{b.inside}" + (f":{b.options}" if b.options else "") for b in binds_of(spec))
        pythonpath = python_path(spec)
        options = (f" \\\n  --container-image={image_word} --container-workdir=\"$PWD\""
                   f" --container-mounts=\"$PWD:$PWD,{LOG_DIR[1:-1]}:{LOG_DIR[1:-1]}\""
                   f"{',' + word(mounts) if mounts else ''}"
                   + (" --container-env=PYTHONPATH" if pythonpath else "") + self.quoted_flags(spec.container))
        prepare = (f"export PYTHONPATH={word(pythonpath)}  # for the container: pyxis passes the job's"
                   " environment",) if pythonpath else ()
        return Launch(srun_options=options, prepare=prepare)
