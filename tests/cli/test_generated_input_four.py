"""Generated bad input, round four (issue 44): hypothesis over the newest surface: bytes that are not
UTF-8 in every option that reaches a script or a record, job ids of any length, the HPCJAX_* knobs
(names near the real ones, values of any kind), hold names for hold, release and --on, jupyter's
port, preflight's spares, and the data an upload walks (its entries of every kind). Every outcome is
a clean refusal (exit 1 or 2 with `error:` and a hint, or a UsageError) or a value of the right
kind: no other exception, for any input."""

from __future__ import annotations

import json
import os
import stat

from hypothesis import given
from hypothesis import strategies as st

from hpcjax.protocol import envnames
from hpcjax.values.errors import HpcjaxError
from test_bad_input import cli
from test_generated_input_three import SETTINGS, clean, numbers

# Text with the bytes a Latin-1 terminal or file name gives (kept by Python as surrogates).
odd_text = st.text(max_size=12) | st.binary(min_size=1, max_size=8).map(lambda b: b.decode("utf-8", "surrogateescape"))
OPTIONS = ["-J", "--partition", "--account", "--qos", "--constraint", "--output-dir", "--module", "--exclude",
           "--job-name", "--time", "--mem", "--on"]


def run_cli(tmp_path_factory, *argv):
    work = tmp_path_factory.mktemp("w")
    os.environ["HPCJAX_HOME"] = str(work / "home")
    try:
        return work, cli(work, *argv)
    finally:
        del os.environ["HPCJAX_HOME"]


@SETTINGS
@given(option=st.sampled_from(OPTIONS), value=odd_text.filter(lambda v: v and not v.startswith("-")))
def test_any_text_in_a_jobs_options_is_taken_or_refused(tmp_path_factory, option, value):
    work, (code, out, err) = run_cli(tmp_path_factory, "render", option, value, "--", "true")
    clean(code, out, err)
    assert code in (0, 2), err
    if code == 0:
        out.encode("utf-8")  # what was taken is a script that can be written


@SETTINGS
@given(words=st.lists(odd_text, min_size=1, max_size=3), env=odd_text)
def test_any_command_and_env_value_is_taken_or_refused(tmp_path_factory, words, env):
    work, (code, out, err) = run_cli(tmp_path_factory, "render", "--env", f"A={env}", "--", "python3", *words)
    clean(code, out, err)
    assert list(work.iterdir()) == [] or code == 0


@SETTINGS
@given(job=st.text("0123456789_.+sx", min_size=1, max_size=40) | st.integers(0, 10).map(lambda n: "9" * (n * 900 + 1)),
       verb=st.sampled_from(["status", "logs", "cancel", "stacks", "fetch"]))
def test_any_job_id_is_taken_or_refused_without_asking_slurm_about_a_number_no_job_has(tmp_path_factory, job, verb):
    os.environ["SLURM_CONF"] = "/nonexistent"  # a job id that passes reaches no SLURM here: an error, said
    try:
        work, (code, out, err) = run_cli(tmp_path_factory, verb, job)
    finally:
        del os.environ["SLURM_CONF"]
    clean(code, out, err)
    assert code != 0


@SETTINGS
@given(name=st.sampled_from(sorted(envnames.NAMES)).flatmap(
    lambda real: st.sampled_from([real, real[:-1], real + "S", real.replace("_", "", 1), real.lower()])),
    value=numbers)
def test_any_hpcjax_knob_is_taken_or_refused_with_a_hint(tmp_path_factory, name, value):
    work, (code, out, err) = run_cli(tmp_path_factory, "render", "--env", f"{name}={value}", "--", "true")
    clean(code, out, err)


@SETTINGS
@given(name=odd_text, verb=st.sampled_from([["hold", "--name"], ["release"], ["submit", "--on"],
                                            ["shell", "--on"], ["jupyter", "--on"]]))
def test_any_hold_name_is_taken_or_refused(tmp_path_factory, name, verb):
    argv = verb + [name] + (["--", "true"] if verb[0] == "submit" else [])
    os.environ["SLURM_CONF"] = "/nonexistent"
    try:
        work, (code, out, err) = run_cli(tmp_path_factory, *argv)
    finally:
        del os.environ["SLURM_CONF"]
    clean(code, out, err)
    assert code != 0  # no hold is up here


@SETTINGS
@given(port=numbers, spares=numbers)
def test_ports_and_spares_are_taken_or_refused(tmp_path_factory, port, spares):
    for argv in (["jupyter", "--on", "nohold", "--port", port], ["render", "--preflight", "--spares", spares, "--",
                                                                 "true"]):
        work, (code, out, err) = run_cli(tmp_path_factory, *argv)
        clean(code, out, err)


KINDS = ("file", "dir", "fifo", "link_in", "link_out", "link_loop", "unreadable", "odd_name")


@SETTINGS
@given(entries=st.lists(st.sampled_from(KINDS), max_size=5))
def test_any_tree_an_upload_walks_is_taken_or_refused_by_name(tmp_path_factory, entries):
    from hpcjax.launch.uploads import parse_upload

    tree = tmp_path_factory.mktemp("data")
    for number, kind in enumerate(entries):
        path = tree / f"e{number}"
        if kind == "file":
            path.write_text("x")
        elif kind == "dir":
            path.mkdir()
        elif kind == "fifo":
            os.mkfifo(path)
        elif kind == "link_in":
            (tree / f"t{number}").write_text("x")
            path.symlink_to(f"t{number}")
        elif kind == "link_out":
            path.symlink_to("/etc/hostname")
        elif kind == "link_loop":
            path.symlink_to(path.name)
        elif kind == "unreadable":
            path.write_text("x")
            path.chmod(stat.S_IWUSR)
        else:
            (tree / os.fsdecode(f"e{number}-".encode() + b"\xe9")).write_text("x")
    bad = set(entries) - {"file", "dir", "link_in"}
    try:
        local, name = parse_upload(str(tree))
    except HpcjaxError as error:
        assert bad and error.hint, error
    else:
        assert not bad and local == tree.resolve()


@SETTINGS
@given(node=odd_text, as_json=st.booleans())
def test_any_node_name_is_looked_up_or_refused(tmp_path_factory, node, as_json):
    work, (code, out, err) = run_cli(tmp_path_factory, "nodes", *(["--json"] if as_json else []), "--", node)
    clean(code, out, err)
    if code == 0 and as_json:
        assert json.loads(out) == []  # no preflight failed in a fresh home


@SETTINGS
@given(words=st.lists(odd_text, min_size=1, max_size=3), name=odd_text)
def test_any_shell_command_on_any_hold_is_refused_before_anything_runs(tmp_path_factory, words, name):
    os.environ["SLURM_CONF"] = "/nonexistent"
    try:
        work, (code, out, err) = run_cli(tmp_path_factory, "shell", "--on", name, "--", *words)
    finally:
        del os.environ["SLURM_CONF"]
    clean(code, out, err)
    assert code != 0 and out == ""  # no hold is up here
