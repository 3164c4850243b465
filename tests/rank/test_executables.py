"""The step's executable kept between starts (rank.cache.executables): a second start loads it and
computes the same bits; any change of the key compiles and says which part changed; a
damaged file or another user's file is never loaded. Each start is a fresh process, as a
restart is (XLA refuses to load one executable twice in a process)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.jax

PROGRAM = Path(__file__).parents[1] / "data" / "executable_program.py"


def start(cache: Path, rows: int = 8, mesh: str = "4", *extra: str, persistent: Path | None = None) -> dict:
    """One start of the program; `persistent`: JAX's persistent compilation cache there too."""
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "XLA_FLAGS": "--xla_force_host_platform_device_count=4"}
    env.pop("HPCJAX_COMPILE_CACHE", None)  # the test session's: these starts must find only what they made
    if persistent is not None:
        env["HPCJAX_COMPILE_CACHE"] = str(persistent)
    result = subprocess.run([sys.executable, str(PROGRAM), str(cache), str(rows), mesh, *extra],
                            capture_output=True, text=True, env=env, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def stored(cache: Path) -> list[Path]:
    return sorted((cache / "executables" / "step").glob("*/process0.bin"))


def test_a_second_start_loads_the_executable_and_computes_the_same_bits(tmp_path):
    cold = start(tmp_path)
    assert cold["how"].startswith("cold: compiled (no stored executable yet); stored in ")
    warm = start(tmp_path)
    assert warm["how"].startswith(f"warm: executable loaded from {tmp_path}/executables/step/")
    assert warm["result"] == cold["result"]


@pytest.mark.parametrize("change, said", [
    (dict(rows=16), "argument shapes"),
    (dict(mesh="2x2"), "mesh: data 4; devices [0, 1, 2, 3] -> data 2 x model 2; devices [0, 1, 2, 3]"),
    (dict(extra=("0.0.1",)), "JAX version: 0.0.1 -> "),
])
def test_a_changed_key_compiles_and_says_what_changed(tmp_path, change, said):
    first = dict(rows=8, mesh="4", extra=())
    if change.get("extra"):  # the stored executable is the other JAX version's
        first, change = dict(first, extra=change["extra"]), dict(extra=())
    start(tmp_path, first["rows"], first["mesh"], *first["extra"])
    again = dict(first, **change)
    fresh = start(tmp_path, again["rows"], again["mesh"], *again["extra"])
    assert fresh["how"].startswith("cold: compiled (the stored executable is another program's: "), fresh["how"]
    assert said in fresh["how"]
    assert len(stored(tmp_path)) == 2  # both kept: a key is never overwritten by another's
    alone = start(tmp_path / "alone", again["rows"], again["mesh"], *again["extra"])
    assert fresh["result"] == alone["result"]


def test_a_damaged_executable_is_compiled_again_and_replaced(tmp_path):
    cold = start(tmp_path)
    [file] = stored(tmp_path)
    data = bytearray(file.read_bytes())
    for middle in range(len(data) // 2, len(data) // 2 + 64):
        data[middle] ^= 0xFF
    file.write_bytes(bytes(data[: len(data) * 3 // 4]))  # flipped and cut short
    again = start(tmp_path)
    assert again["how"].startswith("cold: compiled (the stored executable did not load ("), again["how"]
    assert again["result"] == cold["result"]
    assert start(tmp_path)["how"].startswith("warm: executable loaded")  # replaced by a good one


def test_a_program_jax_took_from_its_persistent_cache_is_run_but_not_stored(tmp_path):
    """Serialized again, an executable JAX had loaded from its own cache lost its kernels: loaded
    later, it failed at its first run ('Function ... not found'). Such a compile is not stored."""
    xla = tmp_path / "xla"
    first = start(tmp_path / "ours", persistent=xla)
    assert first["how"].startswith("cold: compiled (no stored executable yet); stored in "), first["how"]
    shutil.rmtree(tmp_path / "ours" / "executables")  # ours emptied, JAX's kept: JAX's serves the program
    fresh = start(tmp_path / "ours", persistent=xla)
    assert "came from JAX's persistent cache, not stored" in fresh["how"], fresh["how"]
    assert not stored(tmp_path / "ours") and fresh["result"] == first["result"]


def test_an_executable_of_another_key_under_this_key_is_not_loaded(tmp_path):
    start(tmp_path, rows=8)
    start(tmp_path, rows=16)
    small, large = stored(tmp_path)
    small.write_bytes(large.read_bytes())  # a file copied into the wrong place
    again = start(tmp_path, rows=8)
    assert "its stored key is not this program's" in again["how"]


@pytest.mark.skipif(os.getuid() != 0, reason="making a file another user's needs root")
def test_another_users_executable_is_not_loaded(tmp_path):
    start(tmp_path)
    [file] = stored(tmp_path)
    os.chown(file, 65534, 65534)
    again = start(tmp_path)
    assert "belongs to uid 65534; only your own are loaded" in again["how"]


COMPILED = Path(__file__).parents[1] / "data" / "compiled_program.py"


def test_hpcjax_compiled_keys_any_program_by_its_code_and_captured_values(tmp_path):
    def run(scale: str, offsets: str) -> dict:
        done = subprocess.run([sys.executable, str(COMPILED), str(tmp_path), scale, offsets], capture_output=True,
                              text=True, env={**os.environ, "JAX_PLATFORMS": "cpu"}, timeout=300)
        assert done.returncode == 0, done.stderr[-3000:]
        return json.loads(done.stdout.strip().splitlines()[-1])

    assert run("2.0", "1,2,3,4")["how"].startswith("cold: compiled (no stored executable yet)")
    again = run("2.0", "1,2,3,4")
    assert again["how"].startswith("warm: executable loaded") and again["value"] == 18.0
    for scale, offsets, value in (("3.0", "1,2,3,4", 22.0), ("2.0", "1,2,3,5", 19.0)):  # a captured float, array
        changed = run(scale, offsets)
        assert changed["how"].startswith("cold: compiled (the stored executable is another program's: the "
                                         "program's traced code or the values it captures)"), changed["how"]
        assert changed["value"] == value
