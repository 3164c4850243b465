"""No container: every rank runs the command as it is, on the node's own software."""

from __future__ import annotations

from hpcjax.containers.table import BARE, Launch, Runtime, register
from hpcjax.values.errors import SpecError


@register
class Bare(Runtime):
    name = BARE
    order = 90
    bare = True

    def check(self, container) -> None:
        if container.image is not None or container.binds or container.flags or container.cleanenv:
            raise SpecError(f"an image, binds, container flags or cleanenv were given with runtime {BARE!r}",
                            "pick a runtime (--runtime apptainer) or drop --image/--bind")

    def image_is_local_file(self, image: str | None) -> bool:
        return False

    def launch(self, spec, image_word: str) -> Launch:
        return Launch()
