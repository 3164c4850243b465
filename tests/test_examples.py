import difflib

from conftest import REPO, developer_script

SLURM_DIR = REPO / "slurm"
examples = developer_script("slurm_examples")  # outside the package (issue 64)
EXAMPLES, REGENERATE, rendered_examples = examples.EXAMPLES, examples.REGENERATE, examples.rendered_examples


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
