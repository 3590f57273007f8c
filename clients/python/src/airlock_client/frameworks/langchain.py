"""airlock's tools as LangChain tools, for LangChain agents and LangGraph's ``ToolNode``.

Each tool is a ``StructuredTool`` with the daemon's name, description and JSON schema. A call
goes through ``Tools.ExecuteTool``: the daemon's policy judges it, an approval it asks is
answered by ``approver`` (or by a person on the console when there is none), and a call that
did not succeed raises ``ToolException`` with what went wrong, which LangChain hands the model
as the tool's message (``handle_tool_error``) with ``status="error"``.
"""

from __future__ import annotations

from typing import Any

from langchain_core.tools import BaseTool, StructuredTool, ToolException

from airlock.v1 import tool_pb2

from ..approvals import Predicate
from ..sync import Client
from ._call import Binding, schema_of

__all__ = ["airlock_tools"]


def airlock_tools(
    client: Client,
    *,
    workspace: str = "",
    names: list[str] | None = None,
    approver: Predicate | None = None,
    approval_policy: str = "risky",
) -> list[BaseTool]:
    """The daemon's tools (or those ``names``) as LangChain tools that run in ``workspace``;
    ``approval_policy`` says which calls ask (``risky``: those of tools that are not
    read-only), ``approver`` answers them."""
    binding = Binding(client=client, workspace=str(workspace), approver=approver, approval_policy=approval_policy)
    return [_tool(binding, info) for info in binding.tools(names)]


def _tool(binding: Binding, tool: tool_pb2.ToolInfo) -> BaseTool:
    def run(**arguments: Any) -> str:
        outcome = binding.call(tool, arguments)
        if not outcome.ok:
            raise ToolException(outcome.text)
        return outcome.text

    async def arun(**arguments: Any) -> str:
        outcome = await binding.acall(tool, arguments)
        if not outcome.ok:
            raise ToolException(outcome.text)
        return outcome.text

    return StructuredTool(
        name=tool.name,
        description=tool.description,
        args_schema=schema_of(tool),
        func=run,
        coroutine=arun,
        handle_tool_error=True,
    )
