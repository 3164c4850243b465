"""The MCP tools' schemas and command lines (hpcjax.cli.tools), without a server: every option a
verb's parser takes is in its tool's schema with its type, and nothing else; any arguments the schema
allows become a command line the verb's own parser reads back to the same values; what it does not
allow is refused with the names that would be valid. (A real server, driven by the MCP SDK's client
against the dev cluster: test_mcp_cluster.py.)"""

from __future__ import annotations

import argparse
import json
import os
import sys

import pytest

from conftest import run_hpcjax
from hpcjax.cli import split_command, tools
from hpcjax.values.errors import UsageError

pytestmark = [pytest.mark.pure]


def sample(prop: dict):
    """A value of the property's type that differs from an option's default."""
    if prop["type"] == "array":
        return [sample(prop["items"]) for _ in range(2)]
    if "enum" in prop:
        return prop["enum"][-1]
    if prop["type"] == "boolean":  # a flag's value when given: true, or false for a --no-... one
        return not prop.get("description", "").startswith("false:")
    return {"integer": 3, "string": "a-value"}[prop["type"]]


def read_back(verb: str, argv: list[str]) -> argparse.Namespace:
    """argv as `hpcjax` reads it (cli.main: the command after `--`, else `--` ends the options)."""
    options, command = split_command(argv)
    parser = tools.verb_parser(verb)
    if parser.get_default("takes_command"):
        namespace = parser.parse_args(options[1:])
        namespace.command = command
        return namespace
    return parser.parse_args(options[1:] + (["--", *command] if command is not None else []))


@pytest.mark.parametrize("verb", tools.TOOLS)
def test_every_option_the_verb_takes_is_in_its_schema_and_reads_back_the_same(verb):
    schema = next(t for t in tools.tool_schemas() if t["name"] == verb)["inputSchema"]
    parser = tools.verb_parser(verb)
    taken = {a.dest for a in parser._actions if not isinstance(a, argparse._HelpAction)
             and a.help != argparse.SUPPRESS} - set(tools.LEFT_OUT.get(verb, {}))
    assert set(schema["properties"]) - {tools.COMMAND} == taken
    for dest in taken:
        action = next(a for a in parser._actions if a.dest == dest)
        kind = schema["properties"][dest]
        kind = kind["items"] if kind["type"] == "array" else kind
        if action.type in tools.WHOLE_NUMBERS:
            assert kind["type"] == "integer", dest
        if isinstance(action, (argparse._StoreTrueAction, argparse._StoreFalseAction)):
            assert kind["type"] == "boolean", dest
    arguments = {name: sample(prop) for name, prop in schema["properties"].items()}
    if verb == "runs":  # one word it knows, and a job (its second positional)
        arguments.update(what="show", job="42")
    namespace = read_back(verb, tools.command_line(verb, arguments))
    for name, value in arguments.items():
        assert getattr(namespace, name) == value, (name, value, getattr(namespace, name))


def test_a_value_that_starts_with_a_dash_is_a_value_not_an_option():
    namespace = read_back("submit", tools.command_line("submit", {"job_name": "-x", "command": ["--version"]}))
    assert namespace.job_name == "-x" and namespace.command == ["--version"]
    assert read_back("status", tools.command_line("status", {"job_id": "-1"})).job_id == "-1"


@pytest.mark.parametrize("arguments, said, hint", [
    ({"job_id": "1", "ntasks": 4}, "tool status takes no argument 'ntasks'", "its arguments are: job_id, json, "),
    ({}, "tool status needs job_id", "its arguments are: job_id"),
    ({"job_id": ["1", "2"]}, "tool status: job_id is a list, ['1', '2']", "give job_id one value"),
    ({"job_id": "1", "json": "yes"}, "tool status: json is 'yes', not true or false", "give json: true or false"),
    ({"job_id": {"id": 1}}, "tool status: job_id holds {'id': 1}", "give job_id as text or a number"),
])
def test_what_the_schema_does_not_allow_is_refused_before_anything_runs(arguments, said, hint):
    with pytest.raises(UsageError) as refused:
        tools.command_line("status", arguments)
    assert refused.value.message == said and refused.value.hint.startswith(hint)


def test_a_later_word_without_the_one_before_it_is_refused_not_shifted():
    with pytest.raises(UsageError) as refused:  # `runs -- 42` would read 42 as what to do
        tools.command_line("runs", {"job": "42"})
    assert refused.value.message == "tool runs: job is given without what"
    assert refused.value.hint == "give what too: they are read in turn (what job)"
    assert read_back("runs", tools.command_line("runs", {"what": "show", "job": "42"})).job == "42"


def test_a_left_out_option_says_why_and_what_to_do_instead():
    with pytest.raises(UsageError) as refused:
        tools.command_line("logs", {"job_id": "1", "follow": True})
    assert refused.value.hint == "follow: it streams until the job ends: call logs again (tail) to see more"
    with pytest.raises(UsageError) as refused:
        tools.command_line("submit", {"nodes": 1})
    assert refused.value.message == "tool submit needs command"
    with pytest.raises(UsageError, match="no tool 'train'"):
        tools.command_line("train", {})


def test_the_mcp_verb_lists_the_schemas_and_says_what_to_install_without_the_sdk(tmp_path, monkeypatch, capsys):
    listed = run_hpcjax("mcp", "--list", cwd=tmp_path)
    assert listed.returncode == 0 and json.loads(listed.stdout) == tools.tool_schemas()
    from hpcjax.cli import main

    monkeypatch.setitem(sys.modules, "mcp", None)  # as where the extra is not installed
    monkeypatch.setitem(sys.modules, "mcp.server.lowlevel", None)
    assert main(["mcp"]) == 2
    err = capsys.readouterr().err
    assert "error: `hpcjax mcp` needs the MCP SDK, which is not installed here" in err
    assert 'hint: install it with hpcjax: pip install "hpcjax[mcp]"' in err


# Generated calls (hypothesis): any names, any JSON values. A call is refused by the server with its
# message and hint, or becomes a command line the verb's parser reads or refuses in the house way:
# never another exception, so an agent never meets a traceback.
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

json_value = st.recursive(st.none() | st.booleans() | st.integers(-3, 10**12) | st.floats(allow_nan=False)
                          | st.text(max_size=8), lambda inner: st.lists(inner, max_size=3)
                          | st.dictionaries(st.text(max_size=4), inner, max_size=2), max_leaves=4)


# The same examples every run (CI must not fail on a draw); HPCJAX_EXAMPLES=N draws N new ones (1500
# ran clean when this was written).
@settings(max_examples=int(os.environ.get("HPCJAX_EXAMPLES", 60)), deadline=None, database=None,
          derandomize=not os.environ.get("HPCJAX_EXAMPLES"))
@given(verb=st.sampled_from(tools.TOOLS), data=st.data())
def test_any_generated_call_is_refused_in_words_or_read_by_the_verbs_parser(verb, data):
    names = list(next(t for t in tools.tool_schemas() if t["name"] == verb)["inputSchema"]["properties"])
    arguments = data.draw(st.dictionaries(st.sampled_from(names + ["bogus", "ntasks"]), json_value, max_size=4))
    try:
        argv = tools.command_line(verb, arguments)
    except UsageError as refused:
        assert refused.message and refused.hint
        return
    try:
        read_back(verb, argv)
    except UsageError as refused:  # the CLI's own refusal (cli.parsing.Parser), as a terminal shows it
        assert refused.message and refused.hint
