"""airlock's tools as LangChain tools, for LangChain agents and LangGraph's ``ToolNode``.

Each tool is a ``BaseTool`` with the daemon's name, description and JSON schema. A call
goes through ``Tools.ExecuteTool``: the daemon's policy judges it, an approval it asks is
answered by ``approver`` (or by a person on the console when there is none), and a call that
did not succeed raises ``ToolException`` with what went wrong, which LangChain hands the model
as the tool's message (``handle_tool_error``) with ``status="error"``.
"""

from __future__ import annotations

import json
from typing import Any

from langchain_core.tools import BaseTool, ToolException
from pydantic import ConfigDict

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


class AirlockTool(BaseTool):
    """One of the daemon's tools. The model's arguments reach the daemon as one document:
    LangChain would otherwise take arguments named ``config`` or ``run_manager`` for its own."""

    model_config = ConfigDict(arbitrary_types_allowed=True)
    binding: Binding
    info: tool_pb2.ToolInfo

    def _to_args_and_kwargs(
        self, tool_input: str | dict[str, Any], tool_call_id: str | None
    ) -> tuple[tuple[Any, ...], dict[str, Any]]:
        if isinstance(tool_input, str):
            try:
                tool_input = json.loads(tool_input)
            except json.JSONDecodeError as error:
                raise ToolException(f"invalid arguments, nothing ran: not JSON ({error})") from None
        if not isinstance(tool_input, dict):
            raise ToolException("invalid arguments, nothing ran: the arguments must be a JSON object")
        return (tool_input,), {}

    def _run(self, arguments: dict[str, Any]) -> str:
        outcome = self.binding.call(self.info, arguments)
        if not outcome.ok:
            raise ToolException(outcome.text)
        return outcome.text

    async def _arun(self, arguments: dict[str, Any]) -> str:
        outcome = await self.binding.acall(self.info, arguments)
        if not outcome.ok:
            raise ToolException(outcome.text)
        return outcome.text


def _tool(binding: Binding, tool: tool_pb2.ToolInfo) -> BaseTool:
    return AirlockTool(
        name=tool.name,
        description=tool.description,
        args_schema=schema_of(tool),
        handle_tool_error=True,
        binding=binding,
        info=tool,
    )
