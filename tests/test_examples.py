import difflib
from pathlib import Path

from hpcjax.slurm.examples import EXAMPLES, REGENERATE, rendered_examples

SLURM_DIR = Path(__file__).resolve().parent.parent / "slurm"


def test_example_scripts_are_current():
    stale = []
    for name, text in rendered_examples().items():
        path = SLURM_DIR / name
        current = path.read_text() if path.exists() else ""
        if current != text:
            stale.append("".join(difflib.unified_diff(current.splitlines(True), text.splitlines(True),
                                                      f"slurm/{name} (committed)", f"slurm/{name} (rendered)")))
    assert not stale, "example scripts are stale; regenerate with:\n  " + REGENERATE + "\n" + "\n".join(stale)


def test_examples_cover_seed_layouts():
    names = {spec.layout.name for spec in EXAMPLES.values()}
    assert names == {"G4N1p4", "G4N2p2", "G4N2p4", "G8N2p8"}
