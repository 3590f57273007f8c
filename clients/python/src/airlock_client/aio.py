"""The asyncio client: one typed method per call of the ``airlock.v1`` API, over one channel.

:func:`connect` opens the channel and asks the daemon who this client is
(``Daemon.GetInfo``), so that an address where nothing listens, a certificate the daemon
refuses or a token it does not know is reported there rather than by the first call. Runs
are driven through :class:`~airlock_client.runs.RunHandle`, tool calls through
:class:`~airlock_client.execution.Execution`, approvals through
:class:`~airlock_client.approvals.ApprovalConsole` and
:class:`~airlock_client.approvals.AutoApprover`. :mod:`airlock_client.sync` wraps this
client for code that is not asyncio.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol, TypeVar

import grpc
import grpc.aio

from airlock.v1 import (
    agent_pb2,
    agent_pb2_grpc,
    approval_pb2,
    cassette_pb2,
    changes_pb2,
    daemon_pb2,
    daemon_pb2_grpc,
    policy_pb2,
    policy_pb2_grpc,
    rules_pb2,
    run_event_pb2,
    tool_pb2,
    tools_pb2,
    tools_pb2_grpc,
    trace_pb2,
)

from ._peer import Peer
from .approvals import ApprovalConsole, AutoApprover, Predicate, decision_for
from .connection import DEFAULT_ENDPOINT, Endpoint, discover_token, open_channel
from .errors import DataLossError, InternalError, InvalidArgumentError, NotFoundError, UnavailableError, UnreachableError
from .execution import Execution
from .runs import DEFAULT_REATTACH_S, MAX_INPUT_BYTES, RunHandle

__all__ = ["AsyncClient", "connect"]

# How long connecting waits for the daemon's first answer. A daemon on the same host answers
# within milliseconds; without a bound, an address that drops packets would hang the caller
# until the kernel gave up on the TCP handshake, minutes later.
CONNECT_TIMEOUT_S = 5.0
# One page of kept output asked for at a time by read_all_output: the daemon's largest.
_OUTPUT_PAGE = 1024 * 1024

ApprovalPolicyLike = str | int | None
T = TypeVar("T")


class _Page(Protocol):
    @property
    def next_page_token(self) -> str: ...


P = TypeVar("P", bound=_Page)


async def connect(
    endpoint: str | None = None,
    *,
    token: str | None = None,
    ca_cert: str | os.PathLike[str] | None = None,
    client_cert: str | os.PathLike[str] | None = None,
    client_key: str | os.PathLike[str] | None = None,
    timeout: float = CONNECT_TIMEOUT_S,
) -> AsyncClient:
    """Connects to airlockd at ``endpoint`` ($AIRLOCK_SERVER, else 127.0.0.1:7411) and checks
    that it answers and knows the token.

    ``token``: else $AIRLOCK_TOKEN, else the token file of a daemon on this host. For an
    ``https://`` daemon, ``ca_cert`` (else $AIRLOCK_TLS_CA, else the system's roots) is the CA
    its certificate must chain to; ``client_cert`` and ``client_key`` (else $AIRLOCK_TLS_CERT
    and $AIRLOCK_TLS_KEY) are this client's, for a daemon that requires one (mutual TLS)."""
    address = Endpoint.parse(endpoint or os.environ.get("AIRLOCK_SERVER") or DEFAULT_ENDPOINT)

    def tls_file(given: str | os.PathLike[str] | None, variable: str) -> str | os.PathLike[str] | None:
        # The environment's TLS files are for an https:// daemon only.
        if given is not None or not address.tls:
            return given
        return os.environ.get(variable) or None

    channel = open_channel(
        address,
        ca_cert=tls_file(ca_cert, "AIRLOCK_TLS_CA"),
        client_cert=tls_file(client_cert, "AIRLOCK_TLS_CERT"),
        client_key=tls_file(client_key, "AIRLOCK_TLS_KEY"),
    )
    try:
        peer = Peer(endpoint=address.url, token=discover_token(token, address), channel=channel)
        stub = daemon_pb2_grpc.DaemonStub(channel)
        try:
            # Not wait_for_ready: a refused connection or handshake fails now, with grpc-core's
            # reason (connection refused, the certificate that failed), not at the deadline.
            info = await stub.GetInfo(daemon_pb2.GetInfoRequest(), metadata=peer.metadata, timeout=timeout)
        except grpc.RpcError as error:
            refused = peer.error(error, stub.GetInfo)
            if isinstance(refused, UnavailableError):
                raise UnreachableError(
                    unreachable_message(address, error_details(error)),
                    endpoint=address.url,
                    method="/airlock.v1.Daemon/GetInfo",
                ) from None
            raise refused from None
        if info is None:
            raise DataLossError(
                f"the server at {address.url} answered GetInfo with a message that does not decode: "
                "is it airlockd?",
                endpoint=address.url,
            )
    except BaseException:
        await channel.close()
        raise
    return AsyncClient(peer, info)


def error_details(error: grpc.RpcError) -> str:
    code = getattr(error, "code", lambda: None)()
    details = getattr(error, "details", lambda: "")() or ""
    return details or (code.name if code is not None else str(error))


def unreachable_message(address: Endpoint, details: str) -> str:
    """Why connecting failed, in grpc-core's words, with what to check."""
    lowered = details.lower()
    if address.tls and any(w in lowered for w in ("tsi_", "handshake", "ssl", "certificate")):
        return (
            f"TLS with airlockd at {address.url} failed: {details} — is its certificate signed "
            "by ca_cert, and does it require a client certificate (client_cert, client_key)?"
        )
    if not address.tls and "socket closed" in lowered:
        return (
            f"airlockd at {address.url} closed the connection: {details} — does it serve TLS? "
            "Then the address is https://"
        )
    return f"cannot reach airlockd at {address.url}: {details} — is it running?"


def policy_value(value: ApprovalPolicyLike) -> run_event_pb2.ApprovalPolicy.ValueType:
    """``"risky"``, ``"always"``, ``"never"``, ``"auto"`` (or the enum's value) as the enum."""
    if value is None:
        return run_event_pb2.APPROVAL_POLICY_UNSPECIFIED
    if isinstance(value, int):
        return run_event_pb2.ApprovalPolicy.ValueType(value)
    name = value.upper()
    if not name.startswith("APPROVAL_POLICY_"):
        name = "APPROVAL_POLICY_" + name
    try:
        return run_event_pb2.ApprovalPolicy.Value(name)
    except ValueError:
        known = ", ".join(
            n.removeprefix("APPROVAL_POLICY_").lower()
            for n in run_event_pb2.ApprovalPolicy.keys()
            if n != "APPROVAL_POLICY_UNSPECIFIED"
        )
        raise ValueError(f"approval_policy {value!r}: use one of {known}") from None


def model_config(
    model: str | agent_pb2.ModelConfig | None, *, script: str | None, cassette: str | None
) -> agent_pb2.ModelConfig | None:
    """The model a run names: ``openai:MODEL``, ``anthropic:MODEL``, ``scripted`` with a
    ``script`` (a transcript, YAML or JSON), ``replay`` with a ``cassette``."""
    if isinstance(model, agent_pb2.ModelConfig):
        return model
    if model is None and script is None and cassette is None:
        return None
    if model is None:
        model = "scripted" if script is not None else "replay"
    return agent_pb2.ModelConfig(model=model, script=script or "", cassette=cassette or "")


class AsyncClient:
    """A connection to one daemon. Close it with :meth:`close` (or ``async with``)."""

    def __init__(self, peer: Peer, info: daemon_pb2.DaemonInfo) -> None:
        self._peer = peer
        self._tools = tools_pb2_grpc.ToolsStub(peer.channel)
        self._agent = agent_pb2_grpc.AgentStub(peer.channel)
        self._daemon = daemon_pb2_grpc.DaemonStub(peer.channel)
        self._policy = policy_pb2_grpc.PolicyStub(peer.channel)
        #: What the daemon said at connect: its version, this client's tenant, the workspace
        #: roots it may name and the limits its requests must keep.
        self.info = info

    @property
    def endpoint(self) -> str:
        return self._peer.endpoint

    async def close(self) -> None:
        """Closes the connection: calls still open end, later ones fail as a lost connection."""
        self._peer.closed[0] = True
        await self._peer.channel.close()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.close()

    async def _pages(
        self,
        page: Callable[[str], Awaitable[P]],
        items: Callable[[P], Iterable[T]],
    ) -> AsyncIterator[T]:
        """Every item of a paged list: ``page(token)`` fetches a page, ``items`` takes its
        items. A daemon that hands back a token it gave before would page forever: that is an
        :class:`InternalError` naming it."""
        token = ""
        seen: set[str] = set()
        while True:
            next_page = await page(token)
            for item in items(next_page):
                yield item
            seen.add(token)
            token = next_page.next_page_token
            if not token:
                return
            if token in seen:
                raise InternalError(
                    f"airlockd at {self.endpoint} answered with page token {token!r} again", endpoint=self.endpoint
                )

    # --- the daemon -------------------------------------------------------------------

    async def daemon_info(self) -> daemon_pb2.DaemonInfo:
        """Asks again what :attr:`info` holds."""
        self.info = await self._peer.unary(self._daemon.GetInfo, daemon_pb2.GetInfoRequest())
        return self.info

    async def collect_garbage(self, older_than_ms: int = 0) -> daemon_pb2.CollectGarbageResponse:
        """Deletes finished runs, kept outputs and empty sessions older than ``older_than_ms``
        (the daemon's retention when 0). The default tenant's call."""
        return await self._peer.unary(
            self._daemon.CollectGarbage, daemon_pb2.CollectGarbageRequest(older_than_ms=older_than_ms)
        )

    async def review_mcp_server(self, server: str) -> daemon_pb2.TrustMcpServerResponse:
        """What trusting hosted MCP server ``server`` would accept; trusts nothing."""
        return await self._peer.unary(
            self._daemon.TrustMcpServer, daemon_pb2.TrustMcpServerRequest(server=server, show=True)
        )

    async def trust_mcp_server(self, server: str, *, reviewed: str) -> daemon_pb2.TrustMcpServerResponse:
        """Trusts the listing a review (:meth:`review_mcp_server`) showed, by its digest —
        refused when the server listed anything else since."""
        return await self._peer.unary(
            self._daemon.TrustMcpServer,
            daemon_pb2.TrustMcpServerRequest(server=server, reviewed=reviewed),
        )

    # --- tools ------------------------------------------------------------------------

    async def list_tools(self) -> list[tool_pb2.ToolInfo]:
        """Every tool the daemon serves this client, in the daemon's order."""
        response = await self._peer.unary(self._tools.ListTools, tools_pb2.ListToolsRequest())
        return list(response.tools)

    async def get_tool(self, name: str) -> tool_pb2.ToolInfo:
        """One tool's description, schema and sandbox; :class:`NotFoundError` when the daemon
        serves no tool of that name."""
        for tool in await self.list_tools():
            if tool.name == name:
                return tool
        raise NotFoundError(f"tool: no tool {name!r} on airlockd at {self.endpoint}", endpoint=self.endpoint)

    def execute(
        self,
        tool: str,
        arguments: Mapping[str, Any] | str | None = None,
        *,
        workspace: str | os.PathLike[str] | None = None,
        timeout_ms: int = 0,
        require_approval: bool = False,
    ) -> Execution:
        """Starts one call of ``tool`` with ``arguments`` (a mapping, or JSON text) and
        returns its event stream."""
        arguments_json = arguments if isinstance(arguments, str) else json.dumps(arguments or {})
        request = tools_pb2.ExecuteToolRequest(
            tool=tool,
            arguments_json=arguments_json,
            workspace=os.fspath(workspace) if workspace is not None else "",
            timeout_ms=timeout_ms,
            require_approval=require_approval,
        )
        return Execution(self._peer, request)

    async def run_tool(
        self,
        tool: str,
        arguments: Mapping[str, Any] | str | None = None,
        *,
        workspace: str | os.PathLike[str] | None = None,
        timeout_ms: int = 0,
    ) -> tool_pb2.ToolResult:
        """Calls ``tool`` and returns its result, whatever its status."""
        async with self.execute(tool, arguments, workspace=workspace, timeout_ms=timeout_ms) as execution:
            return await execution.result()

    async def cancel_execution(self, execution_id: str) -> None:
        """Stops a running call; its stream then ends."""
        await self._peer.unary(
            self._tools.CancelExecution, tools_pb2.CancelExecutionRequest(execution_id=execution_id)
        )

    async def read_output(self, execution_id: str, offset: int = 0, length: int = 0) -> tools_pb2.ReadOutputResponse:
        """One page of the whole output the daemon kept for a call whose result was cut."""
        return await self._peer.unary(
            self._tools.ReadOutput,
            tools_pb2.ReadOutputRequest(execution_id=execution_id, offset=offset, length=length),
        )

    async def iter_output(self, execution_id: str, offset: int = 0) -> AsyncIterator[bytes]:
        """The kept output from ``offset`` to its end, page by page."""
        while True:
            page = await self.read_output(execution_id, offset, _OUTPUT_PAGE)
            if page.data:
                yield page.data
            if page.offset != offset:
                raise DataLossError(
                    f"the kept output of {execution_id} came back from {page.offset}, not {offset}",
                    endpoint=self.endpoint,
                )
            offset += len(page.data)
            if page.eof or not page.data:
                return

    async def read_all_output(self, execution_id: str) -> bytes:
        """The whole output kept for a call, byte for byte, checked against the digest the
        daemon keeps of it (:class:`DataLossError` when they differ)."""
        whole = bytearray()
        digest = ""
        offset = 0
        while True:
            page = await self.read_output(execution_id, offset, _OUTPUT_PAGE)
            digest = digest or page.digest
            if page.offset != offset or len(whole) + len(page.data) > page.total_bytes:
                raise DataLossError(
                    f"the kept output of {execution_id} came back out of order or past its "
                    f"size ({page.total_bytes} bytes)",
                    endpoint=self.endpoint,
                )
            whole += page.data
            offset += len(page.data)
            if page.eof or not page.data:
                break
        if digest and hashlib.sha256(whole).hexdigest() != digest.removeprefix("sha256:").lower():
            raise DataLossError(
                f"the kept output of {execution_id} does not match its digest {digest}",
                endpoint=self.endpoint,
            )
        return bytes(whole)

    # --- runs ---------------------------------------------------------------------------

    async def start_run(
        self,
        input: str,
        *,
        workspace: str | os.PathLike[str] | None = None,
        model: str | agent_pb2.ModelConfig | None = None,
        script: str | None = None,
        cassette: str | None = None,
        tools: Sequence[str] = (),
        approval_policy: ApprovalPolicyLike = None,
        budgets: run_event_pb2.Budgets | None = None,
        approval_timeout_ms: int = 0,
        stop_on_denial: bool = False,
        instructions: str = "",
        rules: str = "",
        session_id: str = "",
        reattach_s: float = DEFAULT_REATTACH_S,
    ) -> RunHandle:
        """Starts an agent run on ``input`` and returns the handle that follows and steers it.

        Every field of ``StartRun`` has its keyword; ``session_id`` continues a session (the
        run inherits its settings and conversation). A refused start raises here."""
        start = agent_pb2.StartRun(
            session_id=session_id,
            workspace=os.fspath(workspace) if workspace is not None else "",
            input=input,
            model=model_config(model, script=script, cassette=cassette),
            tools=list(tools),
            approval_policy=policy_value(approval_policy),
            budgets=budgets,
            approval_timeout_ms=approval_timeout_ms,
            stop_on_denial=stop_on_denial,
            instructions=instructions,
            rules=rules,
        )
        if len(input.encode()) > MAX_INPUT_BYTES:
            raise InvalidArgumentError(f"start.input: over {MAX_INPUT_BYTES} bytes", endpoint=self.endpoint)
        handle = RunHandle(self._peer, agent_pb2.RunRequest(start=start), reattach_s=reattach_s)
        await handle._open(agent_pb2.RunRequest(start=start))
        return handle

    async def attach_run(self, run_id: str, after_seq: int = 0, *, reattach_s: float = DEFAULT_REATTACH_S) -> RunHandle:
        """Follows an existing run: every event after ``after_seq`` (0 for all), then the live
        ones. The handle can answer the run's approvals, cancel it and send it input."""
        request = agent_pb2.RunRequest(attach=agent_pb2.AttachRun(run_id=run_id, after_seq=after_seq))
        handle = RunHandle(self._peer, request, run_id=run_id, after_seq=after_seq, reattach_s=reattach_s)
        await handle._open(request)
        return handle

    async def watch_run(self, run_id: str, after_seq: int = 0) -> AsyncIterator[run_event_pb2.RunEvent]:
        """A run's events, read only (``WatchRun``, what gRPC-Web clients use)."""
        self._peer.check_open()
        call = self._agent.WatchRun(agent_pb2.AttachRun(run_id=run_id, after_seq=after_seq), metadata=self._peer.metadata)
        try:
            async for event in call:
                yield self._peer.decoded(event, run_event_pb2.RunEvent, self._agent.WatchRun)
        except grpc.RpcError as error:
            raise self._peer.error(error, self._agent.WatchRun) from None
        finally:
            call.cancel()

    async def get_run(self, run_id: str) -> agent_pb2.RunInfo:
        """One run's record: its state, and once finished its stop reason, text and usage."""
        return await self._peer.unary(self._agent.GetRun, agent_pb2.GetRunRequest(run_id=run_id))

    async def list_runs(
        self, *, session_id: str = "", state: int = 0, page_size: int = 0, page_token: str = ""
    ) -> agent_pb2.ListRunsResponse:
        """One page of runs, newest first."""
        request = agent_pb2.ListRunsRequest(
            session_id=session_id,
            state=agent_pb2.RunState.ValueType(state),
            page_size=page_size,
            page_token=page_token,
        )
        return await self._peer.unary(self._agent.ListRuns, request)

    async def iter_runs(self, *, session_id: str = "", state: int = 0) -> AsyncIterator[agent_pb2.RunInfo]:
        """Every run, newest first, the pages read as needed."""
        async for run in self._pages(
            lambda token: self.list_runs(session_id=session_id, state=state, page_token=token),
            lambda page: page.runs,
        ):
            yield run

    async def cancel_run(self, run_id: str, reason: str = "") -> None:
        """Stops a run; it ends ``CANCELLED`` with ``reason`` as its detail."""
        await self._peer.unary(self._agent.CancelRun, agent_pb2.CancelRunRequest(run_id=run_id, reason=reason))

    async def get_trace(self, run_id: str) -> trace_pb2.Trace:
        """The spans recorded so far of one run, in start order."""
        return await self._peer.unary(self._agent.GetTrace, trace_pb2.GetTraceRequest(run_id=run_id))

    # --- sessions -----------------------------------------------------------------------

    async def create_session(
        self,
        workspace: str | os.PathLike[str] | None = None,
        *,
        settings: agent_pb2.SessionSettings | None = None,
        labels: Mapping[str, str] | None = None,
    ) -> agent_pb2.Session:
        """A session: a workspace, the settings its runs inherit, the approvals granted in it
        and the conversation its runs carry on."""
        request = agent_pb2.CreateSessionRequest(
            workspace=os.fspath(workspace) if workspace is not None else "",
            labels=dict(labels or {}),
            settings=settings,
        )
        return await self._peer.unary(self._agent.CreateSession, request)

    async def get_session(self, session_id: str) -> agent_pb2.Session:
        return await self._peer.unary(self._agent.GetSession, agent_pb2.GetSessionRequest(session_id=session_id))

    async def iter_sessions(self) -> AsyncIterator[agent_pb2.Session]:
        """Every session of this client's tenant, most recently active first."""
        async for session in self._pages(
            lambda token: self._peer.unary(self._agent.ListSessions, agent_pb2.ListSessionsRequest(page_token=token)),
            lambda page: page.sessions,
        ):
            yield session

    # --- approvals ----------------------------------------------------------------------

    async def approvals(self) -> ApprovalConsole:
        """The approver console of every run of this client's tenant."""
        return await ApprovalConsole(self._peer)._opened()

    def auto_approve(self, predicate: Predicate, *, deny_reason: str = "denied by the client's policy", run_id: str = "") -> AutoApprover:
        """Answers every pending request by ``predicate`` while ``async with`` lasts."""
        return AutoApprover(self._peer, predicate, deny_reason=deny_reason, run_id=run_id)

    async def watch_approvals(self, run_id: str = "") -> AsyncIterator[approval_pb2.ApprovalRequest]:
        """Approval requests and their updates (of one run, or all), read only; answer with
        :meth:`decide`."""
        self._peer.check_open()
        call = self._agent.WatchApprovals(approval_pb2.WatchApprovalsRequest(run_id=run_id), metadata=self._peer.metadata)
        try:
            async for request in call:
                yield self._peer.decoded(request, approval_pb2.ApprovalRequest, self._agent.WatchApprovals)
        except grpc.RpcError as error:
            raise self._peer.error(error, self._agent.WatchApprovals) from None
        finally:
            call.cancel()

    async def decide(
        self,
        request: approval_pb2.ApprovalRequest,
        *,
        approve: bool,
        for_session: bool = False,
        reason: str = "",
        grant_prefix: Sequence[str] = (),
    ) -> None:
        """Answers one approval request of any run (``DecideApproval``), bound to it by its id
        and digest; a request no longer pending is :class:`NotFoundError`."""
        decision = decision_for(
            request, approve=approve, for_session=for_session, reason=reason, grant_prefix=grant_prefix
        )
        await self._peer.unary(self._agent.DecideApproval, decision)

    # --- changes, undo, forks, cassettes -----------------------------------------------

    async def list_changes(self, run_id: str, step: int = 0) -> changes_pb2.ListChangesResponse:
        """The change sets of a run's tool calls (of one step, or all), whole: the daemon's
        pages read one after another, a set that spans pages joined again."""
        whole = changes_pb2.ListChangesResponse()
        offset = 0
        while True:
            page = await self._peer.unary(
                self._agent.ListChanges, changes_pb2.ListChangesRequest(run_id=run_id, step=step, offset=offset)
            )
            whole.workspace = page.workspace
            whole.total_changes = page.total_changes
            for part in page.steps:
                if offset and whole.steps and whole.steps[-1].call_id == part.call_id:
                    whole.steps[-1].change_set.changes.extend(part.change_set.changes)
                else:
                    whole.steps.append(part)
            if page.next_offset == 0 or page.next_offset <= offset:
                return whole
            offset = page.next_offset

    async def read_blob(self, run_id: str, digest: str) -> bytes:
        """A content one of the run's change sets names by digest."""
        response = await self._peer.unary(
            self._agent.ReadBlob, changes_pb2.ReadBlobRequest(run_id=run_id, digest=digest)
        )
        return response.content

    async def revert_run(self, run_id: str, to_step: int = 1, *, force: bool = False) -> changes_pb2.RevertRunResponse:
        """Puts a finished run's workspace back as it was before step ``to_step`` (1: before
        the run); a file changed since is a conflict unless ``force``."""
        return await self._peer.unary(
            self._agent.RevertRun, changes_pb2.RevertRunRequest(run_id=run_id, to_step=to_step, force=force)
        )

    async def fork_run(self, request: changes_pb2.ForkRunRequest) -> agent_pb2.RunInfo:
        """Starts a run whose conversation is another's up to a step; follow it with
        :meth:`attach_run`."""
        return await self._peer.unary(self._agent.ForkRun, request)

    async def get_cassette(self, run_id: str) -> str:
        """A finished run's model exchanges as a cassette (JSON), for a ``replay`` model."""
        response = await self._peer.unary(self._agent.GetCassette, cassette_pb2.GetCassetteRequest(run_id=run_id))
        return response.cassette

    # --- policy -------------------------------------------------------------------------

    async def check_policy(self, request: policy_pb2.CheckPolicyRequest) -> rules_pb2.PolicyVerdict:
        """What the policy would decide for a call, and every rule behind it; runs nothing."""
        return await self._peer.unary(self._policy.CheckPolicy, request)

    async def policy_rules(self, session_id: str = "") -> list[rules_pb2.PolicyRule]:
        """The rules in force; with ``session_id``, also the session's rules and grants."""
        response = await self._peer.unary(
            self._policy.ListPolicyRules, policy_pb2.ListPolicyRulesRequest(session_id=session_id)
        )
        return list(response.rules)

    async def revoke_grant(self, session_id: str, grant_id: str) -> None:
        """Withdraws one of a session's grants (its first 16 characters will do)."""
        await self._peer.unary(
            self._policy.RevokeGrant, policy_pb2.RevokeGrantRequest(session_id=session_id, grant_id=grant_id)
        )

