#!/usr/bin/env python3
"""The MCP conformance suite's test tools that ask their user something in the middle of a
call, or answer with more than text (images, audio, embedded resources), as a third-party server (the official Python SDK) that airlock hosts: run as
`conformance_server.py --http PORT` (Streamable HTTP on 127.0.0.1:PORT/mcp), reached by
airlock as a remote server of the 2026-07-28 revision, so every question is an
`input_required` result (SEP-2322) that airlock puts to the client whose call raised it.

The suite calls these tools on airlock's endpoint by their own names
(tests/tests/all/mcp_conformance.rs hosts this server with `names = "bare"`); what each asks
and answers follows the suite's scenario descriptions (tests/mcp/conformance/README.md)."""

import base64
import io
import json
import sys
import wave

from mcp.server.mcpserver import Context, MCPServer
from mcp.shared.exceptions import MCPError
from mcp_types.jsonrpc import MISSING_REQUIRED_CLIENT_CAPABILITY
from mcp_types import (
    AudioContent,
    CallToolResult,
    EmbeddedResource,
    ImageContent,
    InputRequiredResult,
    TextContent,
    TextResourceContents,
)

server = MCPServer("conformance")


def ask(requests: dict, state: str | None = None) -> InputRequiredResult:
    """An input_required result asking `requests` (method and params by key)."""
    body: dict = {"inputRequests": requests}
    if state is not None:
        body["requestState"] = state
    return InputRequiredResult.model_validate(body)


def elicit(message: str, properties: dict, required: list[str] | None = None) -> dict:
    schema: dict = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    return {"method": "elicitation/create", "params": {"mode": "form", "message": message, "requestedSchema": schema}}


def sample(text: str, max_tokens: int = 100) -> dict:
    return {
        "method": "sampling/createMessage",
        "params": {"messages": [{"role": "user", "content": {"type": "text", "text": text}}], "maxTokens": max_tokens},
    }


def answer(ctx: Context, key: str) -> dict | None:
    """The client's answer to `key`, as JSON; None when it gave none."""
    responses = ctx.input_responses or {}
    if key not in responses:
        return None
    value = responses[key]
    return value.model_dump(by_alias=True, exclude_none=True) if hasattr(value, "model_dump") else value


def text(message: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=message)])


def elicitation_outcome(ctx: Context, key: str, message: str, properties: dict, required=None, prefix="User response"):
    got = answer(ctx, key)
    if got is None:
        return ask({key: elicit(message, properties, required)})
    return text(f"{prefix}: action={got.get('action')}, content={json.dumps(got.get('content') or {})}")


@server.tool(description="Asks the user for their information (elicitation).")
def test_elicitation(message: str, ctx: Context) -> CallToolResult | InputRequiredResult:
    return elicitation_outcome(
        ctx,
        "user_info",
        message,
        {
            "username": {"type": "string", "description": "User's response"},
            "email": {"type": "string", "description": "User's email address"},
        },
        ["username", "email"],
    )


@server.tool(description="Asks a form whose fields have defaults (SEP-1034).")
def test_elicitation_sep1034_defaults(ctx: Context) -> CallToolResult | InputRequiredResult:
    return elicitation_outcome(
        ctx,
        "defaults",
        "Please review and update the form fields with defaults",
        {
            "name": {"type": "string", "description": "User name", "default": "John Doe"},
            "age": {"type": "integer", "description": "User age", "default": 30},
            "score": {"type": "number", "description": "User score", "default": 95.5},
            "status": {
                "type": "string",
                "description": "User status",
                "enum": ["active", "inactive", "pending"],
                "default": "active",
            },
            "verified": {"type": "boolean", "description": "Verification status", "default": True},
        },
        prefix="Elicitation completed",
    )


@server.tool(description="Asks a form with every kind of enum (SEP-1330).")
def test_elicitation_sep1330_enums(ctx: Context) -> CallToolResult | InputRequiredResult:
    return elicitation_outcome(
        ctx,
        "enums",
        "Please select options from the enum fields",
        {
            "untitledSingle": {"type": "string", "enum": ["option1", "option2", "option3"]},
            "titledSingle": {
                "type": "string",
                "oneOf": [
                    {"const": "value1", "title": "First Option"},
                    {"const": "value2", "title": "Second Option"},
                    {"const": "value3", "title": "Third Option"},
                ],
            },
            "legacyEnum": {
                "type": "string",
                "enum": ["opt1", "opt2", "opt3"],
                "enumNames": ["Option One", "Option Two", "Option Three"],
            },
            "untitledMulti": {"type": "array", "items": {"type": "string", "enum": ["option1", "option2", "option3"]}},
            "titledMulti": {
                "type": "array",
                "items": {
                    "anyOf": [
                        {"const": "value1", "title": "First Choice"},
                        {"const": "value2", "title": "Second Choice"},
                        {"const": "value3", "title": "Third Choice"},
                    ]
                },
            },
        },
        prefix="Elicitation completed",
    )


def sampled(ctx: Context, key: str, prompt: str, prefix: str = "LLM response"):
    got = answer(ctx, key)
    if got is None:
        return ask({key: sample(prompt)})
    content = got.get("content") or {}
    return text(f"{prefix}: {content.get('text', '') if isinstance(content, dict) else content}")


@server.tool(description="Asks the client's model to complete a prompt (sampling).")
def test_sampling(prompt: str, ctx: Context) -> CallToolResult | InputRequiredResult:
    return sampled(ctx, "completion", prompt)


@server.tool(description="Asks the user's name in an input_required result.")
def test_input_required_result_elicitation(ctx: Context) -> CallToolResult | InputRequiredResult:
    got = answer(ctx, "user_name")
    name = ((got or {}).get("content") or {}).get("name") if isinstance(got, dict) else None
    if got is None or got.get("action") != "accept" or not isinstance(name, str):
        return ask(
            {"user_name": elicit("What is your name?", {"name": {"type": "string"}}, ["name"])},
        )
    return text(f"Hello, {name}!")


@server.tool(description="Asks the client's model in an input_required result.")
def test_input_required_result_sampling(ctx: Context) -> CallToolResult | InputRequiredResult:
    return sampled(ctx, "capital_question", "What is the capital of France?", prefix="The model says")


@server.tool(description="Asks the client's roots in an input_required result.")
def test_input_required_result_list_roots(ctx: Context) -> CallToolResult | InputRequiredResult:
    got = answer(ctx, "client_roots")
    if got is None:
        return ask({"client_roots": {"method": "roots/list", "params": {}}})
    return text(f"Roots: {json.dumps(got.get('roots', []))}")


@server.tool(description="Asks a confirmation and keeps a request state.")
def test_input_required_result_request_state(ctx: Context) -> CallToolResult | InputRequiredResult:
    got = answer(ctx, "confirm")
    if got is None or ctx.request_state != "confirm-asked":
        return ask(
            {"confirm": elicit("Please confirm", {"ok": {"type": "boolean"}}, ["ok"])},
            state="confirm-asked",
        )
    return text("state-ok")


@server.tool(description="Asks for a confirmation under a request state (the client tampers with it).")
def test_input_required_result_tampered_state(ctx: Context) -> CallToolResult | InputRequiredResult:
    return test_input_required_result_request_state(ctx)


@server.tool(description="Asks several things at once.")
def test_input_required_result_multiple_inputs(ctx: Context) -> CallToolResult | InputRequiredResult:
    requests = {
        "user_name": elicit("What is your name?", {"name": {"type": "string"}}, ["name"]),
        "greeting": sample("Generate a greeting", 50),
        "client_roots": {"method": "roots/list", "params": {}},
    }
    missing = {key: request for key, request in requests.items() if answer(ctx, key) is None}
    if missing:
        return ask(missing, state="multiple")
    return text("All inputs received")


@server.tool(description="Asks one thing, then another.")
def test_input_required_result_multi_round(ctx: Context) -> CallToolResult | InputRequiredResult:
    if ctx.request_state == "round-2" and answer(ctx, "step2") is not None:
        return text("Both rounds answered")
    if ctx.request_state == "round-1" and answer(ctx, "step1") is not None:
        return ask(
            {"step2": elicit("Step 2: What is your favorite color?", {"color": {"type": "string"}}, ["color"])},
            state="round-2",
        )
    return ask(
        {"step1": elicit("Step 1: What is your name?", {"name": {"type": "string"}}, ["name"])},
        state="round-1",
    )


@server.tool(description="Asks only what the client said it can answer.")
def test_input_required_result_capabilities(ctx: Context) -> CallToolResult | InputRequiredResult:
    capabilities = ctx.client_capabilities
    requests = {}
    if capabilities is not None and capabilities.sampling is not None and answer(ctx, "sampled") is None:
        requests["sampled"] = sample("Say something")
    if capabilities is not None and capabilities.elicitation is not None and answer(ctx, "elicited") is None:
        requests["elicited"] = elicit("Say something", {"text": {"type": "string"}})
    if requests:
        return ask(requests)
    return text("Nothing more to ask")


@server.tool(description="Needs the client to sample, and says so when it cannot (-32021).")
def test_missing_capability(ctx: Context) -> CallToolResult | InputRequiredResult:
    capabilities = ctx.client_capabilities
    if capabilities is None or capabilities.sampling is None:
        raise MCPError(
            code=MISSING_REQUIRED_CLIENT_CAPABILITY,
            message="This tool needs the client to offer sampling",
            data={"requiredCapabilities": {"sampling": {}}},
        )
    return sampled(ctx, "needed", "Say something")


@server.tool(description="Asks at once, in its first answer.")
def test_streaming_elicitation(ctx: Context) -> CallToolResult | InputRequiredResult:
    return elicitation_outcome(ctx, "streamed", "Anything to add?", {"note": {"type": "string"}})


# A 1x1 red PNG.
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="


def wav() -> str:
    """A tenth of a second of silence, as a WAV file in base64."""
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(8000)
        out.writeframes(b"\0\0" * 800)
    return base64.b64encode(buffer.getvalue()).decode()


@server.tool(description="Answers an image.")
def test_image_content() -> CallToolResult:
    return CallToolResult(content=[ImageContent(type="image", data=PNG, mime_type="image/png")])


@server.tool(description="Answers audio.")
def test_audio_content() -> CallToolResult:
    return CallToolResult(content=[AudioContent(type="audio", data=wav(), mime_type="audio/wav")])


@server.tool(description="Answers an embedded resource.")
def test_embedded_resource() -> CallToolResult:
    resource = TextResourceContents(
        uri="test://embedded-resource", mime_type="text/plain", text="This is an embedded resource content."
    )
    return CallToolResult(content=[EmbeddedResource(type="resource", resource=resource)])


@server.tool(description="Answers text, an image and an embedded resource.")
def test_multiple_content_types() -> CallToolResult:
    resource = TextResourceContents(
        uri="test://mixed-content-resource", mime_type="application/json", text='{"test":"data","value":123}'
    )
    return CallToolResult(
        content=[
            TextContent(type="text", text="Multiple content types test:"),
            ImageContent(type="image", data=PNG, mime_type="image/png"),
            EmbeddedResource(type="resource", resource=resource),
        ]
    )


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run()
