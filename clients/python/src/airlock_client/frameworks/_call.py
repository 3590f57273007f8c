"""The one tool call every adapter makes: run it through ``ExecuteTool``, answer the approval
it may ask with the adapter's approver (or leave it to a person on the console), and read the
result as the text the model is shown and whether it is a failure."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import Mapping
from typing import Any

from airlock.v1 import approval_pb2, tool_pb2

from ..approvals import Predicate
from ..errors import AirlockError, ConnectionLostError
from ..sync import Client


@dataclasses.dataclass(frozen=True)
class Outcome:
    """What the model is told of one call: ``text``, and whether the call failed."""

    ok: bool
    text: str
    result: tool_pb2.ToolResult | None = None


@dataclasses.dataclass(frozen=True)
class Binding:
    """What every adapted tool of one client shares: the client, the workspace calls run in,
    and who answers approvals (None: a person, on the console or CLI, until the request's
    deadline)."""

    client: Client
    workspace: str
    approver: Predicate | None
    #: Which calls ask before they run, beside those the daemon's rules make ask: ``risky``
    #: (every tool that is not read-only, as an agent run's default policy), ``always``, or
    #: ``daemon`` (only what the daemon's rules say).
    approval_policy: str = "risky"
    deny_reason: str = "the agent's approver refused this call"

    def __post_init__(self) -> None:
        if self.approval_policy not in ("risky", "always", "daemon"):
            raise ValueError(f"approval_policy {self.approval_policy!r}: use risky, always or daemon")

    def asks(self, tool: tool_pb2.ToolInfo) -> bool:
        """Whether a call of ``tool`` asks for approval by this binding's policy."""
        if self.approval_policy == "always":
            return True
        return self.approval_policy == "risky" and tool.risk != tool_pb2.RISK_READ_ONLY

    def tools(self, names: list[str] | None) -> list[tool_pb2.ToolInfo]:
        listed = self.client.list_tools()
        if names is None:
            return listed
        by_name = {tool.name: tool for tool in listed}
        missing = [name for name in names if name not in by_name]
        if missing:
            raise AirlockError(f"airlockd at {self.client.endpoint} serves no tool {', '.join(missing)}")
        return [by_name[name] for name in names]

    def call(self, tool: tool_pb2.ToolInfo, arguments: Mapping[str, Any]) -> Outcome:
        """The call, made on the client's loop, waited for from this thread (a Ctrl-C here
        cancels it: a call still asking is withdrawn, a running tool stopped)."""
        return self.client._loop.run(self._call(tool, arguments))

    async def acall(self, tool: tool_pb2.ToolInfo, arguments: Mapping[str, Any]) -> Outcome:
        """The call, made on the client's loop, awaited from the caller's; cancelling the
        caller cancels it."""
        future = self.client.run_coroutine(self._call(tool, arguments))
        try:
            return await asyncio.wrap_future(future)
        except asyncio.CancelledError:
            future.cancel()
            raise

    async def _call(self, tool: tool_pb2.ToolInfo, arguments: Mapping[str, Any]) -> Outcome:
        client = self.client.asyncio
        try:
            async with client.execute(
                tool.name,
                dict(arguments),
                workspace=self.workspace or None,
                require_approval=self.asks(tool),
            ) as execution:
                async for event in execution:
                    if event.WhichOneof("event") == "approval" and self.approver is not None:
                        refused = await self._answer(event.approval)
                        if refused is not None:
                            return refused
                result = await execution.result()
        except ConnectionLostError as error:
            return Outcome(
                ok=False,
                text=f"the connection to airlock broke during the call; whether it took effect is unknown ({error.message})",
            )
        except AirlockError as error:
            return Outcome(ok=False, text=f"airlock refused the call: {error.message}")
        return describe(result)

    async def _answer(self, request: approval_pb2.ApprovalRequest) -> Outcome | None:
        """Puts ``request`` to the approver, in a worker thread (it may ask a person, or call
        airlock itself); a failed approver fails the call, which then never runs."""
        assert self.approver is not None
        try:
            approved = bool(await asyncio.to_thread(self.approver, request))
        except Exception as error:  # noqa: BLE001 - told to the model, the call withdrawn
            await self.client.asyncio.decide(request, approve=False, reason="the approver failed")
            return Outcome(ok=False, text=f"the approver failed, nothing ran: {type(error).__name__}: {error}")
        await self.client.asyncio.decide(request, approve=approved, reason="" if approved else self.deny_reason)
        return None


# What the model is told of each failed status, before the tool's or daemon's own words.
_FAILURES = {
    tool_pb2.TOOL_STATUS_TOOL_ERROR: "the tool failed",
    tool_pb2.TOOL_STATUS_INVALID_ARGUMENTS: "invalid arguments, nothing ran",
    tool_pb2.TOOL_STATUS_DENIED: "denied, nothing ran",
    tool_pb2.TOOL_STATUS_TIMEOUT: "timed out and was stopped",
    tool_pb2.TOOL_STATUS_CANCELLED: "cancelled",
    tool_pb2.TOOL_STATUS_LIMIT_EXCEEDED: "hit a resource limit and was stopped",
    tool_pb2.TOOL_STATUS_SANDBOX_ERROR: "the sandbox could not be set up, nothing ran",
    tool_pb2.TOOL_STATUS_OUTCOME_UNKNOWN: "interrupted; whether it took effect is unknown",
}


def describe(result: tool_pb2.ToolResult) -> Outcome:
    """A result as the model reads it: the content of a success (said to be cut when it was),
    else what went wrong in words."""
    if result.status == tool_pb2.TOOL_STATUS_OK:
        text = result.content
        if result.truncated:
            text += f"\n[output cut: {result.original_bytes} bytes in all]"
        return Outcome(ok=True, text=text, result=result)
    what = _FAILURES.get(result.status, tool_pb2.ToolStatus.Name(result.status))
    detail = result.error_message or result.content
    return Outcome(ok=False, text=f"{what}: {detail}" if detail else what, result=result)


def schema_of(tool: tool_pb2.ToolInfo) -> dict[str, Any]:
    schema = json.loads(tool.input_schema_json or "{}")
    if not isinstance(schema, dict):
        raise AirlockError(f"tool {tool.name}: its input schema is not a JSON object")
    schema.setdefault("type", "object")
    schema.setdefault("properties", {})
    return schema
