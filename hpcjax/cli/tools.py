"""The verbs an agent drives as tools (`hpcjax mcp`, hpcjax.cli.agents): each tool's input schema is
read from the verb's own argparse parser, the one the CLI and its reference page are built from, so
neither can drift from the other; and a tool's arguments become that verb's command line, which the
CLI then checks with its own refusals and hints. No MCP here: the schemas and command lines are plain
data (the server is agents.py).

A tool's argument is the option's Python name (`gpus_per_node` for --gpus-per-node, `job_id` for the
positional), with JSON types from the option's kind: a whole number, a flag (true/false), a list for an
option given several times, a word from a fixed set. `submit` takes the job's command as `command`, a
list of words, as after `--`."""

from __future__ import annotations

import argparse

from hpcjax.cli import kinds
from hpcjax.cli.verbs import HELP
from hpcjax.values.errors import UsageError

# The verbs an agent needs, in the order they are listed.
TOOLS = ("submit", "status", "logs", "stacks", "cancel", "free", "runs", "report")
# Options a tool leaves out, and why: each waits on a person or without end, where a tool call answers
# once (an agent follows a job with `status` and `logs`).
LEFT_OUT = {
    "submit": {"wait": "a job's end can be hours away: call status until it has ended"},
    "logs": {"follow": "it streams until the job ends: call logs again (tail) to see more"},
    "report": {"open": "it opens a browser on this machine"},
}
COMMAND = "command"  # submit's job command, the words after `--`
WHOLE_NUMBERS = {int: None, kinds.positive: 1, kinds.count: 0}  # argparse type -> the least it takes


def verb_parser(verb: str) -> argparse.ArgumentParser:
    from hpcjax.cli import build_parser

    parser = build_parser(verb)
    [verbs] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return verbs.choices[verb]


def offered(verb: str, parser: argparse.ArgumentParser) -> list[argparse.Action]:
    """The parser's options a tool takes: not --help, not the sbatch options hpcjax refuses (their help
    is suppressed: they exist to say what to use instead), not what LEFT_OUT names."""
    return [a for a in parser._actions
            if not isinstance(a, argparse._HelpAction) and a.help != argparse.SUPPRESS
            and a.dest not in LEFT_OUT.get(verb, {})]


def takes_many(action: argparse.Action) -> bool:
    """Whether the option takes a list: given several times (--env A --env B), or several words."""
    return isinstance(action, argparse._AppendAction) or action.nargs in ("+", "*")


def schema_of(action: argparse.Action) -> dict:
    """One option as JSON Schema: its type, the values it takes, its help."""
    many = takes_many(action)
    if isinstance(action, (argparse._StoreTrueAction, argparse._StoreFalseAction)):
        kind: dict = {"type": "boolean"}
    elif action.type in WHOLE_NUMBERS:
        kind = {"type": "integer"}
        if WHOLE_NUMBERS[action.type] is not None:
            kind["minimum"] = WHOLE_NUMBERS[action.type]
    else:
        kind = {"type": "string"}
    if action.choices:
        kind["enum"] = list(action.choices)
    # the help as `--help` shows it (argparse's own expansion of %(default)s and the like)
    said = argparse.HelpFormatter("hpcjax")._expand_help(action) if action.help else ""
    if isinstance(action, argparse._StoreFalseAction):
        said = f"false: {action.option_strings[0]} ({said})" if said else f"false: {action.option_strings[0]}"
    described = {"description": said} if said else {}
    if many:
        return {"type": "array", "items": kind, **({"minItems": 1} if action.nargs == "+" else {}), **described}
    return {**kind, **described}


def tool_schemas() -> list[dict]:
    """Every tool: its name, its line in `hpcjax --help`, and its input schema (JSON Schema)."""
    tools = []
    for verb in TOOLS:
        parser = verb_parser(verb)
        taken = offered(verb, parser)
        properties = {a.dest: schema_of(a) for a in taken}
        required = [a.dest for a in taken if not a.option_strings and a.nargs not in ("?", "*")]
        if parser.get_default("takes_command"):
            properties[COMMAND] = {"type": "array", "items": {"type": "string"}, "minItems": 1,
                                   "description": "the job's command, one word each (what follows `--`)"}
            required.append(COMMAND)
        left_out = "; ".join(f"no {name.replace('_', '-')}: {why}" for name, why in LEFT_OUT.get(verb, {}).items())
        tools.append({"name": verb, "description": HELP[verb] + (f" ({left_out})" if left_out else ""),
                      "inputSchema": {"type": "object", "properties": properties, "required": required,
                                      "additionalProperties": False}})
    return tools


def command_line(verb: str, arguments: dict) -> list[str]:
    """The arguments of a call of tool `verb` as the words after `hpcjax`: options first, then `--` and
    the positionals (or submit's command), so that no value is taken for an option. What the schema
    does not allow is refused here, before anything runs; each value's own check is the CLI's."""
    if verb not in TOOLS:
        raise UsageError(f"no tool {verb!r}", f"the tools are: {', '.join(TOOLS)}")
    parser = verb_parser(verb)
    actions = {a.dest: a for a in offered(verb, parser)}
    takes_command = bool(parser.get_default("takes_command"))
    valid = [*actions, *([COMMAND] if takes_command else [])]
    unknown = [name for name in arguments if name not in valid]
    if unknown:
        hint = "; ".join(f"{n}: {w}" for n, w in LEFT_OUT.get(verb, {}).items() if n in unknown)
        raise UsageError(f"tool {verb} takes no argument {', '.join(map(repr, unknown))}",
                         hint or f"its arguments are: {', '.join(valid)}")
    missing = [dest for dest, a in actions.items() if not a.option_strings and a.required and dest not in arguments]
    if takes_command and COMMAND not in arguments:
        missing.append(COMMAND)
    if missing:
        raise UsageError(f"tool {verb} needs {', '.join(missing)}", f"its arguments are: {', '.join(valid)}")
    positionals = [dest for dest, a in actions.items() if not a.option_strings]
    for earlier, later in zip(positionals, positionals[1:]):
        if arguments.get(later) is not None and arguments.get(earlier) is None:  # the words would shift left
            raise UsageError(f"tool {verb}: {later} is given without {earlier}",
                             f"give {earlier} too: they are read in turn ({' '.join(positionals)})")
    options, after = [], []
    for dest, action in actions.items():
        if dest not in arguments or arguments[dest] is None:
            continue
        value = arguments[dest]
        if not action.option_strings:
            after += _words(verb, dest, value, many=takes_many(action))
        elif isinstance(action, (argparse._StoreTrueAction, argparse._StoreFalseAction)):
            if not isinstance(value, bool):
                raise UsageError(f"tool {verb}: {dest} is {value!r}, not true or false", f"give {dest}: true or false")
            if value != action.default:  # the flag changes it: true for --json, false for --no-bind-hpcjax
                options.append(action.option_strings[-1])
        else:
            flag = action.option_strings[-1] if action.option_strings[-1].startswith("--") else action.option_strings[0]
            options += [f"{flag}={word}" for word in _words(verb, dest, value, takes_many(action))]
    if takes_command:
        after = _words(verb, COMMAND, arguments[COMMAND], many=True)
    return [verb, *options, *(["--", *after] if after else [])]


def _words(verb: str, dest: str, value, many: bool) -> list[str]:
    """A value as command-line words: one, or one per item of a list (for an option given several times)."""
    values = value if isinstance(value, list) else [value]
    if isinstance(value, list) and not many:
        raise UsageError(f"tool {verb}: {dest} is a list, {value!r}", f"give {dest} one value")
    if any(isinstance(v, (dict, list)) or v is None for v in values):
        raise UsageError(f"tool {verb}: {dest} holds {value!r}", f"give {dest} as text or a number")
    return [str(v).lower() if isinstance(v, bool) else str(v) for v in values]
