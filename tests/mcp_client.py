"""The MCP SDK's own client, driving one `hpcjax mcp` server over stdio for a test (tests/cli/
test_mcp_cluster.py; tests/releases/test_strict_site.py, through a release's login side)."""

from __future__ import annotations

import os
import sys

import anyio


def drive(cwd, steps, server: list[str] | None = None):
    """steps(call, session) run against one `hpcjax mcp` server started in cwd (by `server`, an argv,
    else this Python's); call(tool, **arguments) answers (text, structured content, is_error)."""
    from mcp import ClientSession, StdioServerParameters, stdio_client

    command, *args = server or [sys.executable, "-m", "hpcjax", "mcp"]

    async def session_run():
        params = StdioServerParameters(command=command, args=args, env=dict(os.environ), cwd=str(cwd))
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()

            async def call(tool, **arguments):
                result = await session.call_tool(tool, arguments)
                return result.content[0].text, result.structured_content, result.is_error

            return await steps(call, session)

    return anyio.run(session_run)
