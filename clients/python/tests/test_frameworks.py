"""airlock behind LangGraph and the OpenAI Agents SDK, offline: each framework's agent loop
driven by a model that plays recorded turns (LangChain's fake chat model; for the Agents SDK,
which ships no fake, a model written here against its ``Model`` interface), every tool call
made for real through a daemon."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any

import pytest

import airlock_client
from airlock.v1 import approval_pb2

from .conftest import Daemon


@pytest.fixture(scope="module")
def client(daemon: Daemon) -> Iterator[airlock_client.Client]:
    with airlock_client.connect(daemon.endpoint, token=daemon.token) as c:
        yield c


def approve_writes_to(name: str) -> Any:
    """An approver that lets only writes of ``name`` through."""

    def approver(request: approval_pb2.ApprovalRequest) -> bool:
        return request.tool == "write_file" and json.loads(request.arguments_json)["path"] == name

    return approver


def test_langgraph_agent_calls_airlock_tools(client: airlock_client.Client, daemon: Daemon) -> None:
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage, ToolMessage
    from langgraph.graph import START, MessagesState, StateGraph
    from langgraph.prebuilt import ToolNode, tools_condition

    from airlock_client.frameworks.langchain import airlock_tools

    class FakeToolModel(GenericFakeChatModel):
        def bind_tools(self, tools: Sequence[Any], **_: Any) -> FakeToolModel:  # type: ignore[override]
            return self

    turns = [
        AIMessage(
            content="",
            tool_calls=[
                {"name": "write_file", "args": {"path": "lg.txt", "content": "from langgraph\n"}, "id": "call_w"},
                {"name": "write_file", "args": {"path": "other.txt", "content": "no\n"}, "id": "call_d"},
            ],
        ),
        AIMessage(content="", tool_calls=[{"name": "read_file", "args": {"path": 7}, "id": "call_bad"}]),
        AIMessage(content="", tool_calls=[{"name": "read_file", "args": {"path": "lg.txt"}, "id": "call_r"}]),
        # Arguments LangChain would take for its own reach the daemon, which refuses them.
        AIMessage(
            content="", tool_calls=[{"name": "read_file", "args": {"path": "lg.txt", "config": "x"}, "id": "call_c"}]
        ),
        AIMessage(content="all done"),
    ]
    tools = airlock_tools(
        client,
        workspace=str(daemon.workspace),
        names=["write_file", "read_file"],
        approver=approve_writes_to("lg.txt"),
    )
    assert [tool.name for tool in tools] == ["write_file", "read_file"]
    model = FakeToolModel(messages=iter(turns)).bind_tools(tools)

    def think(state: MessagesState) -> dict[str, Any]:
        return {"messages": [model.invoke(state["messages"])]}

    # The agent loop as LangGraph builds it: the model, then the tools it called, until it
    # calls none.
    graph = StateGraph(MessagesState)
    graph.add_node("agent", think)
    graph.add_node("tools", ToolNode(tools))
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", tools_condition)
    graph.add_edge("tools", "agent")
    state = graph.compile().invoke({"messages": [("user", "write lg.txt")]})
    replies = {m.tool_call_id: m for m in state["messages"] if isinstance(m, ToolMessage)}
    assert replies["call_w"].status == "success"
    assert (daemon.workspace / "lg.txt").read_text() == "from langgraph\n"
    assert replies["call_d"].status == "error"
    assert "denied" in str(replies["call_d"].content)
    assert not (daemon.workspace / "other.txt").exists()
    assert replies["call_bad"].status == "error"
    assert "invalid arguments" in str(replies["call_bad"].content)
    assert "from langgraph" in str(replies["call_r"].content)
    assert replies["call_c"].status == "error"
    assert "config" in str(replies["call_c"].content)
    assert state["messages"][-1].content == "all done"

    # The same tools from asyncio code.
    read = next(tool for tool in tools if tool.name == "read_file")
    assert "from langgraph" in asyncio.run(read.ainvoke({"path": "lg.txt"}))


def test_openai_agents_sdk_agent_calls_airlock_tools(client: airlock_client.Client, daemon: Daemon) -> None:
    from agents import Agent, ModelResponse, Runner, Usage
    from agents.models.interface import Model
    from openai.types.responses import (
        ResponseFunctionToolCall,
        ResponseOutputMessage,
        ResponseOutputText,
    )

    from airlock_client.frameworks.openai_agents import airlock_function_tools

    seen_outputs: list[dict[str, Any]] = []

    class PlayedModel(Model):
        """Plays its turns in order, keeping the tool outputs the runner sends back."""

        def __init__(self, turns: list[list[Any]]) -> None:
            self.turns = iter(turns)

        async def get_response(self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any) -> ModelResponse:
            if isinstance(input, list):
                seen_outputs.extend(i for i in input if isinstance(i, dict) and i.get("type") == "function_call_output")
            return ModelResponse(output=next(self.turns), usage=Usage(), response_id=None)

        def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
            raise NotImplementedError("the test runs without streaming")

    def call(call_id: str, name: str, arguments: dict[str, Any]) -> ResponseFunctionToolCall:
        return ResponseFunctionToolCall(
            type="function_call", id=f"fc_{call_id}", call_id=call_id, name=name, arguments=json.dumps(arguments)
        )

    final = ResponseOutputMessage(
        id="msg_1",
        type="message",
        role="assistant",
        status="completed",
        content=[ResponseOutputText(type="output_text", text="finished", annotations=[])],
    )
    model = PlayedModel(
        [
            [call("c1", "write_file", {"path": "sdk.txt", "content": "from the agents sdk\n"})],
            [call("c2", "write_file", {"path": "nope.txt", "content": "x"})],
            [call("c3", "list_dir", {"path": "."})],
            [final],
        ]
    )
    tools = airlock_function_tools(
        client, workspace=str(daemon.workspace), names=["write_file", "list_dir"], approver=approve_writes_to("sdk.txt")
    )
    agent = Agent(name="coder", instructions="write files", tools=list(tools), model=model)
    result = Runner.run_sync(agent, "write sdk.txt")
    assert result.final_output == "finished"
    assert (daemon.workspace / "sdk.txt").read_text() == "from the agents sdk\n"
    assert not (daemon.workspace / "nope.txt").exists()
    outputs = {o["call_id"]: str(o["output"]) for o in seen_outputs}
    assert outputs["c2"].startswith("error: denied"), outputs
    assert "sdk.txt" in outputs["c3"], outputs


def test_an_approver_that_fails_fails_the_call_and_nothing_runs(client: airlock_client.Client, daemon: Daemon) -> None:
    from airlock_client.frameworks.langchain import airlock_tools

    def approver(request: approval_pb2.ApprovalRequest) -> bool:
        raise RuntimeError("the approval service is down")

    (write,) = airlock_tools(client, workspace=str(daemon.workspace), names=["write_file"], approver=approver)
    reply = write.invoke(
        {"type": "tool_call", "name": "write_file", "id": "call_x", "args": {"path": "x.txt", "content": "x"}}
    )
    assert reply.status == "error"
    assert "the approver failed" in str(reply.content) and "approval service is down" in str(reply.content)
    assert not (daemon.workspace / "x.txt").exists()
    # The client is not stuck behind it.
    assert client.list_tools()
