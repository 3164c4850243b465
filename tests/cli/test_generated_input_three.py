"""Generated bad input, round three (issue 34, part 3): hypothesis over the newer surface:
counts, ports and states on the command line, the Python API's options of every kind, the
profile's cluster keys, job records (as another user or a wreck could leave them) and the
cluster a record names, uploads, --after, the frames `hpcjax stacks` reads back, and
hpcjax.compiled's names. Every outcome is a clean refusal (an HpcjaxError, or exit 1/2 with
`error:` and a hint) or a value of the right kind: no other exception, for any input."""

from __future__ import annotations

import json
import os

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import hpcjax
from hpcjax.values import jsonlines
from hpcjax.catalog import records
from hpcjax.values.errors import HpcjaxError
from hpcjax.job import clusters, profiles
from hpcjax.job.after import OPTION, dependencies

from test_bad_input import cli
from test_generated_input import PIECES, hostile

SETTINGS = settings(max_examples=int(os.environ.get("HPCJAX_EXAMPLES", 40)), deadline=None, database=None,
                    derandomize=not os.environ.get("HPCJAX_EXAMPLES"),
                    suppress_health_check=[HealthCheck.function_scoped_fixture])
numbers = st.integers(-10**6, 10**6).map(str) | st.sampled_from(["", "0", "-0", "1e3", "0x10", " 5", "5 ", "٣"]) \
    | hostile
# Any JSON value: what a hand-edited or a hostile record holds.
json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
                           lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner,
                                                                                     max_size=3), max_leaves=8)


def clean(code: int, out: str, err: str) -> None:
    """A refusal as the house format gives it, or not a refusal at all."""
    assert "Traceback" not in err, err
    if code in (1, 2):  # after any progress line, the house format
        assert "\nerror: " in "\n" + err and "\n\nhint: " in err, err


@SETTINGS
# The job id is no job's: a value the parser takes ends at that refusal, without asking SLURM.
@given(verb=st.sampled_from([["logs", "no-job", "--tail"], ["logs", "no-job", "--rank"],
                             ["tunnel", "no-job", "80", "--local-port"], ["tunnel", "no-job"],
                             ["check", "bandwidth", "--sizes", "bogus", "--iters"], ["runs", "--state"],
                             ["runs", "--since"], ["stacks", "no-job", "--rank"]]), value=numbers)
def test_counts_ports_and_states_are_refused_or_taken(tmp_path_factory, verb, value):
    work = tmp_path_factory.mktemp("w")
    os.environ["HPCJAX_HOME"] = str(work / "home")
    try:
        code, out, err = cli(work, *verb, value)
    finally:
        del os.environ["HPCJAX_HOME"]
    clean(code, out, err)


KEYS = list(profiles.OPTIONS)


@SETTINGS
@given(options=st.dictionaries(st.sampled_from(KEYS), json_values | hostile, max_size=3))
def test_scaling_config_of_any_values_is_made_or_refused(options):
    try:
        hpcjax.ScalingConfig(**options)
    except HpcjaxError as error:
        assert error.message and error.hint


@SETTINGS
@given(fields=st.dictionaries(st.sampled_from(["host", "remote_dir", "ssh_options", "python", "ship_limit_mb"]),
                              json_values | hostile, max_size=4))
def test_a_profiles_cluster_keys_give_a_cluster_or_a_refusal(tmp_path_factory, fields):
    path = tmp_path_factory.mktemp("p") / "profiles.toml"
    lines = "\n".join(f"{k} = {json.dumps(v)}" for k, v in fields.items())
    path.write_text(f"[profiles.site]\n{lines}\n")
    try:
        cluster = clusters.cluster_named("site", profile_file=path)
    except HpcjaxError as error:
        assert error.hint
        return
    except ValueError:  # json.dumps wrote something TOML reads otherwise (a float's form): the loader said so
        return
    if cluster is not None:
        assert not cluster.destination.startswith("-") and cluster.profile == "site"


@SETTINGS
@given(record=st.dictionaries(st.sampled_from(["backend", "output_dir", "layout", "cluster", "run_dir", "pids",
                                               "state", "command"]), json_values, max_size=6),
       cluster=st.dictionaries(st.sampled_from(["destination", "remote_dir", "profile", "profile_file", "ssh_options",
                                                "python"]), json_values | hostile, max_size=5))
def test_a_record_of_any_shape_is_refused_or_names_a_cluster_reached_only_the_users_way(record, cluster):
    try:
        parsed = records.parse(json.dumps({**record, "cluster": cluster}), "7", "generated")
    except records.DamagedRecord:
        return
    if parsed is None:
        return
    try:
        found = clusters.cluster_from_record(parsed.get("cluster"), profile_file="/nonexistent/profiles.toml")
    except HpcjaxError:
        return
    if found is not None:  # whatever the record said of ssh options or a Python
        assert found.ssh_options == () and found.python == "python3"


@SETTINGS
@given(text=hostile | st.text(max_size=12))
def test_after_is_parsed_or_refused(text):
    try:
        [(job, when)] = dependencies(text, OPTION)
    except HpcjaxError:
        return
    assert job.replace("_", "").isdigit() and when in ("ok", "any")


@SETTINGS
@given(entries=st.lists(json_values, max_size=4), noise=st.lists(st.sampled_from(PIECES) | st.text(max_size=30),
                                                                 max_size=8), cut=st.integers(1, 2000))
def test_frames_through_any_noise_come_back_whole_or_are_named(entries, noise, cut):
    framed = [line for i, e in enumerate(entries) for line in jsonlines.frame(e, "node1", i)]
    text = "\n".join(noise[: len(noise) // 2] + framed + noise[len(noise) // 2:])
    whole, broken = jsonlines.unframe(text)
    assert whole == entries and broken == []
    damaged, named = jsonlines.unframe(text[:cut])  # cut anywhere: never an exception
    assert set(named) <= {"node1"} and len(damaged) <= len(entries)


@SETTINGS
@given(name=hostile | st.text(max_size=70))
def test_compiled_refuses_a_name_that_is_not_plain(tmp_path_factory, name):
    from hpcjax.rank.cache.executables import PROGRAM_NAME, check_program

    class Jitted:
        def trace(self, *args):
            raise AssertionError("traced")

    try:
        check_program(Jitted(), name)
    except HpcjaxError:
        return
    assert PROGRAM_NAME.fullmatch(name) and "/" not in name and ".." not in name


@SETTINGS
@given(text=hostile | st.text(max_size=20))
def test_an_upload_is_a_directory_and_a_plain_relative_name_or_refused(tmp_path_factory, text):
    from hpcjax.launch.uploads import UPLOAD_NAME, parse_upload

    work = tmp_path_factory.mktemp("u")
    (work / "data").mkdir()
    try:
        path, name = parse_upload(text, cwd=work)
    except HpcjaxError:
        return
    assert path.exists() and UPLOAD_NAME.fullmatch(name) and ".." not in name.split("/")


@SETTINGS
@given(path=hostile | st.text(max_size=20) | json_values)
def test_data_is_a_path_or_refused(tmp_path_factory, path):
    try:
        data = hpcjax.Data(path)
    except HpcjaxError:
        return
    assert isinstance(data.path, str) and data.path.startswith("/")
