"""airlock's tools as function tools of the OpenAI Agents SDK.

Each tool is a ``FunctionTool`` with the daemon's name, description and JSON schema (not
"strict": airlock's schemas are JSON Schema as tools wrote them, and the daemon checks every
call against them). A call goes through ``Tools.ExecuteTool``: the daemon's policy judges it,
an approval it asks is answered by ``approver`` (or by a person on the console when there is
none), and a call that did not succeed is told to the model in words, as the SDK's own
function tools tell an error.
"""

from __future__ import annotations

import json
from typing import Any

from agents import FunctionTool
from agents.tool_context import ToolContext

from airlock.v1 import tool_pb2

from ..approvals import Predicate
from ..sync import Client
from ._call import Binding, schema_of

__all__ = ["airlock_function_tools"]


def airlock_function_tools(
    client: Client,
    *,
    workspace: str = "",
    names: list[str] | None = None,
    approver: Predicate | None = None,
    approval_policy: str = "risky",
) -> list[FunctionTool]:
    """The daemon's tools (or those ``names``) as function tools that run in ``workspace``."""
    binding = Binding(client=client, workspace=str(workspace), approver=approver, approval_policy=approval_policy)
    return [_tool(binding, info) for info in binding.tools(names)]


def _tool(binding: Binding, tool: tool_pb2.ToolInfo) -> FunctionTool:
    async def invoke(_context: ToolContext[Any], arguments_json: str) -> str:
        try:
            arguments = json.loads(arguments_json or "{}")
        except json.JSONDecodeError as error:
            return f"invalid arguments, nothing ran: not JSON ({error})"
        if not isinstance(arguments, dict):
            return "invalid arguments, nothing ran: the arguments must be a JSON object"
        outcome = await binding.acall(tool, arguments)
        return outcome.text if outcome.ok else f"error: {outcome.text}"

    return FunctionTool(
        name=tool.name,
        description=tool.description,
        params_json_schema=schema_of(tool),
        on_invoke_tool=invoke,
        strict_json_schema=False,
    )
