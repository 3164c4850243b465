"""`hpcjax mcp`: an MCP server on stdin and stdout, for an AI agent (Claude, Cursor, an MCP client of
one's own) to drive hpcjax with the verbs it needs (cli.tools: the tools and their schemas, read from
the CLI's own parsers).

A tool call runs the verb's command line (`hpcjax status 42`) as its own process, as a person would type it: the same checks,
refusals and hints, the same exit status; and nothing a verb prints can reach the protocol's stream
(stdout is the protocol's). Its answer is the verb's stdout, with what it said on stderr (progress,
notes, or the refusal and its hint) after it, and the exit status; a status other than 0 is an error
result, which the agent reads as it would read the terminal. Needs the MCP SDK, hpcjax's `mcp` extra:

    pip install "hpcjax[mcp]"
    claude mcp add hpcjax -- hpcjax mcp       # or any client: command `hpcjax`, argument `mcp`
"""

from __future__ import annotations

import argparse
import subprocess
import sys

from hpcjax import __version__
from hpcjax.cli import tools
from hpcjax.cli.verbs import HELP
from hpcjax.values.errors import HpcjaxError, UsageError
from hpcjax.values.voice import say

# What a tool changes: none of these (an agent may call them freely), or something on the cluster.
READ_ONLY = {"status", "logs", "stacks", "free", "runs"}
DESTRUCTIVE = {"cancel"}
INSTRUCTIONS = ("hpcjax submits JAX jobs to a SLURM cluster (or this machine's CPU with backend local) and follows "
                "them. submit prints the job id; follow the job with status (json: true for fields) and logs; an "
                "error result carries hpcjax's own message and its hint: act on the hint.")


def add_mcp_verb(sub) -> None:
    parser = sub.add_parser("mcp", help=HELP["mcp"], description=__doc__.split("\n\n")[0],
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--list", action="store_true",
                        help="print the tools and their input schemas as JSON, and serve nothing")
    parser.set_defaults(run=cmd_mcp, takes_command=False)


def cmd_mcp(args: argparse.Namespace, command: list[str]) -> int:
    if args.list:
        import json

        print(json.dumps(tools.tool_schemas(), indent=2))
        return 0
    try:
        import anyio
        import mcp_types as types
        from mcp.server.lowlevel import Server
        from mcp.server.stdio import stdio_server
    except ImportError as missing:
        raise UsageError(f"`hpcjax mcp` needs the MCP SDK, which is not installed here ({missing})",
                         'install it with hpcjax: pip install "hpcjax[mcp]"') from None
    listed = [types.Tool(name=t["name"], description=t["description"], input_schema=t["inputSchema"],
                         annotations=types.ToolAnnotations(read_only_hint=t["name"] in READ_ONLY,
                                                           destructive_hint=t["name"] in DESTRUCTIVE))
              for t in tools.tool_schemas()]

    async def list_tools(ctx, params) -> types.ListToolsResult:
        return types.ListToolsResult(tools=listed)

    async def call_tool(ctx, params) -> types.CallToolResult:
        try:
            argv = tools.command_line(params.name, dict(params.arguments or {}))
        except HpcjaxError as refused:  # before anything runs, in the CLI's words
            return types.CallToolResult(content=[types.TextContent(type="text", text=f"error: {refused}")],
                                        is_error=True)
        done = await anyio.to_thread.run_sync(run_verb, argv)
        return types.CallToolResult(content=[types.TextContent(type="text", text=answer_text(done))],
                                    structured_content={"exit_code": done.returncode, "stdout": done.stdout,
                                                        "stderr": done.stderr},
                                    is_error=done.returncode != 0)

    server = Server("hpcjax", version=__version__, instructions=INSTRUCTIONS, on_list_tools=list_tools,
                    on_call_tool=call_tool)

    async def serve() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    say(f"hpcjax mcp: serving {len(listed)} tools on stdin and stdout ({', '.join(tools.TOOLS)})")
    try:
        anyio.run(serve)
    except KeyboardInterrupt:
        pass
    return 0


def run_verb(argv: list[str]) -> subprocess.CompletedProcess:
    """The hpcjax command line argv (`status 42`) as its own process, here (the server's working directory
    and environment)."""
    return subprocess.run([sys.executable, "-m", "hpcjax", *argv], stdin=subprocess.DEVNULL, capture_output=True,
                          text=True)


def answer_text(done: subprocess.CompletedProcess) -> str:
    """What the agent reads: stdout, then stderr under its own heading, then a status other than 0."""
    parts = [done.stdout.rstrip("\n")] if done.stdout.strip() else []
    if done.stderr.strip():
        parts.append("[stderr]\n" + done.stderr.rstrip("\n"))
    if done.returncode != 0:
        parts.append(f"[exit status {done.returncode}]")
    return "\n".join(parts) or "(no output)"
