// Errors: the one AirlockError base class, one subclass per status code of proto/API.md's
// error table, the client's own failures (unreachable, lost connection, a run's stream ended
// early, TLS, bad configuration), and toAirlockError, the one function every call's failure
// goes through. Browser-safe: nothing here imports Node.

import { Code, ConnectError } from "@connectrpc/connect";

export { Code };

/** Where the token sent to the daemon came from, so an UNAUTHENTICATED answer can say so. */
export type TokenSource =
  | { kind: "given" }
  | { kind: "environment" }
  | { kind: "file"; path: string }
  | { kind: "missing"; lookedIn: string }
  /** None given, and the token file at `path` not sent: the daemon at `endpoint` is not on this host. */
  | { kind: "withheld"; path: string; endpoint: string }
  | { kind: "none" };

/** The daemon a client talks to, as its errors name it. */
export interface Peer {
  endpoint: string;
  token: TokenSource;
}

/** The environment variable the token is read from when none is given. */
export const TOKEN_ENV = "AIRLOCK_TOKEN";

const CODE_NAMES: Record<number, string> = {
  [Code.Canceled]: "CANCELLED",
  [Code.Unknown]: "UNKNOWN",
  [Code.InvalidArgument]: "INVALID_ARGUMENT",
  [Code.DeadlineExceeded]: "DEADLINE_EXCEEDED",
  [Code.NotFound]: "NOT_FOUND",
  [Code.AlreadyExists]: "ALREADY_EXISTS",
  [Code.PermissionDenied]: "PERMISSION_DENIED",
  [Code.ResourceExhausted]: "RESOURCE_EXHAUSTED",
  [Code.FailedPrecondition]: "FAILED_PRECONDITION",
  [Code.Aborted]: "ABORTED",
  [Code.OutOfRange]: "OUT_OF_RANGE",
  [Code.Unimplemented]: "UNIMPLEMENTED",
  [Code.Internal]: "INTERNAL",
  [Code.Unavailable]: "UNAVAILABLE",
  [Code.DataLoss]: "DATA_LOSS",
  [Code.Unauthenticated]: "UNAUTHENTICATED",
};

/** The gRPC name of a status code: `NOT_FOUND` for Code.NotFound. */
export function codeName(code: Code): string {
  return CODE_NAMES[code] ?? `CODE_${code}`;
}

export interface AirlockErrorDetails {
  code: Code;
  /** The request field the daemon's message names first (`start.model.model`). */
  field?: string | undefined;
  /** Whether the same call may succeed later (API.md's "retry?" column). */
  retryable?: boolean;
  /** The daemon's own words (or the transport's), without anything added. */
  rawMessage?: string;
  endpoint?: string | undefined;
  /** The call, as `airlock.v1.Service/Method`. */
  method?: string | undefined;
  cause?: unknown;
}

/**
 * Why a call to airlockd did not produce an answer. `code` decides what to do (the table in
 * proto/API.md); `field` is the request field at fault when the daemon named one.
 *
 * A tool that ran and failed is not an error: that is a ToolResult whose status is not OK.
 */
export class AirlockError extends Error {
  readonly code: Code;
  readonly field: string | undefined;
  readonly retryable: boolean;
  readonly rawMessage: string;
  readonly endpoint: string | undefined;
  readonly method: string | undefined;

  constructor(message: string, details: AirlockErrorDetails) {
    super(message, details.cause === undefined ? undefined : { cause: details.cause });
    this.name = new.target.name;
    this.code = details.code;
    this.field = details.field;
    this.retryable = details.retryable ?? false;
    this.rawMessage = details.rawMessage ?? message;
    this.endpoint = details.endpoint;
    this.method = details.method;
  }

  /** The gRPC name of `code`, e.g. `NOT_FOUND`. */
  get codeName(): string {
    return codeName(this.code);
  }
}

// One class per row of API.md's code table. Each is an AirlockError with that code.

/** A field is malformed, missing, or past its bound. Fix the field. */
export class InvalidArgumentError extends AirlockError {}
/** An id or name that names nothing this caller may see. */
export class NotFoundError extends AirlockError {}
/** A position past the end (an output offset, an `after_seq`). */
export class OutOfRangeError extends AirlockError {}
/** Well-formed, but the state forbids it (cancel a finished run; the daemon keeps no outputs). */
export class FailedPreconditionError extends AirlockError {}
/** No token, a malformed header, or a token the daemon does not know. Says where the token came from. */
export class UnauthenticatedError extends AirlockError {
  readonly tokenSource: TokenSource;
  constructor(message: string, details: AirlockErrorDetails & { tokenSource: TokenSource }) {
    super(message, details);
    this.tokenSource = details.tokenSource;
  }
}
/** The tenant may not use this tool, workspace or service. */
export class PermissionDeniedError extends AirlockError {}
/** A cap on concurrent runs or executions, or a message over the size limit. Retry later. */
export class ResourceExhaustedError extends AirlockError {}
/** In a fleet, another daemon took the run over. Retry, on any daemon. */
export class AbortedError extends AirlockError {}
/** The daemon cannot reach its store now, or is stopping. Retry with backoff. */
export class UnavailableError extends AirlockError {}
/** Stored data is damaged. Tell the operator. */
export class DataLossError extends AirlockError {}
/** A bug of the daemon. Report it. */
export class InternalError extends AirlockError {}
/** The daemon does not serve the call: it is older than this client (or is not airlockd). */
export class UnimplementedError extends AirlockError {}

// The client's own failures.

/** Nothing answered at the daemon's address (refused, no such socket, timed out). */
export class UnreachableError extends AirlockError {}
/** The connection broke in the middle of a call; whether a running tool finished is unknown. */
export class ConnectionLostError extends AirlockError {}
/** A call's event stream ended before its last event (a tool call's result). */
export class IncompleteStreamError extends AirlockError {}
/**
 * A run's stream ended before `run_finished`. The run belongs to the daemon and may still be
 * going: follow it again with attachRun(runId, lastSeq).
 */
export class IncompleteRunError extends AirlockError {
  readonly runId: string;
  readonly lastSeq: bigint;
  constructor(message: string, details: AirlockErrorDetails & { runId: string; lastSeq: bigint }) {
    super(message, details);
    this.runId = details.runId;
    this.lastSeq = details.lastSeq;
  }
}
/** A message could not be sent on a stream that is already closed. */
export class StreamClosedError extends AirlockError {}
/** The TLS handshake failed over a certificate: the daemon's, or this client's (or its absence). */
export class TlsError extends AirlockError {}
/** The address cannot be used to connect to anything. */
export class InvalidEndpointError extends AirlockError {}
/** The token or TLS files given cannot be used (unreadable, half a client identity, not ASCII). */
export class CredentialsError extends AirlockError {}
/** The caller cancelled the call (its AbortSignal fired) or its deadline passed. */
export class CanceledError extends AirlockError {}

/**
 * The field path a daemon message starts with: `start.model.model: unknown model …` names
 * `start.model.model`. Undefined when the message names none.
 */
export function fieldOf(message: string): string | undefined {
  const match = /^([A-Za-z_][A-Za-z0-9_]*(?:(?:\.[A-Za-z_][A-Za-z0-9_]*)|(?:\[\d+\]))*): /.exec(message);
  return match?.[1];
}

const RPC_CLASSES: Partial<Record<Code, { cls: typeof AirlockError; retryable: boolean }>> = {
  [Code.InvalidArgument]: { cls: InvalidArgumentError, retryable: false },
  [Code.NotFound]: { cls: NotFoundError, retryable: false },
  [Code.OutOfRange]: { cls: OutOfRangeError, retryable: false },
  [Code.FailedPrecondition]: { cls: FailedPreconditionError, retryable: false },
  [Code.PermissionDenied]: { cls: PermissionDeniedError, retryable: false },
  [Code.ResourceExhausted]: { cls: ResourceExhaustedError, retryable: true },
  [Code.Aborted]: { cls: AbortedError, retryable: true },
  [Code.Unavailable]: { cls: UnavailableError, retryable: true },
  [Code.DataLoss]: { cls: DataLossError, retryable: false },
  [Code.Internal]: { cls: InternalError, retryable: false },
  [Code.Canceled]: { cls: CanceledError, retryable: false },
  [Code.DeadlineExceeded]: { cls: CanceledError, retryable: true },
};

/** What a refused token was: the words that name it in an error. */
export function describeToken(token: TokenSource): string {
  switch (token.kind) {
    case "given":
      return "the access token given with the `token` option";
    case "environment":
      return `the access token in ${TOKEN_ENV}`;
    case "file":
      return `the access token read from ${token.path}`;
    case "missing":
      return `no access token (none given, ${TOKEN_ENV} unset, and no ${token.lookedIn})`;
    case "withheld":
      return `no access token (none given, ${TOKEN_ENV} unset; ${token.path} is sent only to a daemon on this host)`;
    case "none":
      return "no access token";
  }
}

function describeUnauthenticated(peer: Peer, reason: string): string {
  const token = peer.token;
  if (token.kind === "withheld") {
    return (
      `airlockd at ${peer.endpoint} needs an access token, and none was given: pass the ` +
      `\`token\` option or set ${TOKEN_ENV} (the token file ${token.path} is the local daemon's, ` +
      `sent only to a daemon on this host — a unix: socket or a loopback address — not to ${token.endpoint})`
    );
  }
  if (token.kind === "missing" || token.kind === "none") {
    const where =
      token.kind === "missing"
        ? ` (a daemon with the default state dir writes its token to ${token.lookedIn}, which is not there)`
        : "";
    return (
      `airlockd at ${peer.endpoint} needs an access token, and none was given: pass the ` +
      `\`token\` option or set ${TOKEN_ENV}${where}`
    );
  }
  return (
    `airlockd at ${peer.endpoint} does not accept ${describeToken(token)} (${reason}): pass this ` +
    `daemon's token with the \`token\` option or ${TOKEN_ENV} (the file \`token\` in its state ` +
    `dir, or your tenant's token file)`
  );
}

/** Node's error codes (and OpenSSL's, as Node names them) along an error's `cause` chain. */
function causeChain(error: unknown): { codes: string[]; messages: string[] } {
  const codes: string[] = [];
  const messages: string[] = [];
  const seen = new Set<unknown>();
  let next: unknown = error;
  while (next instanceof Error && !seen.has(next)) {
    seen.add(next);
    const code = (next as { code?: unknown }).code;
    if (typeof code === "string") codes.push(code);
    messages.push(next.message);
    next = (next as { cause?: unknown }).cause;
  }
  return { codes, messages };
}

/** Connecting failed: nothing there to talk to. */
const UNREACHABLE_CODES = new Set([
  "ECONNREFUSED",
  "ENOENT",
  "ENOTFOUND",
  "EAI_AGAIN",
  "ETIMEDOUT",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "EADDRNOTAVAIL",
  "ENOTSOCK",
  "EACCES",
  "EPERM",
]);

/** A live connection broke under a call. */
function isBrokenConnection(codes: string[], messages: string[]): boolean {
  return (
    codes.some(
      (c) =>
        c === "ECONNRESET" ||
        c === "EPIPE" ||
        c === "ECONNABORTED" ||
        c === "ERR_STREAM_PREMATURE_CLOSE" ||
        c === "ERR_STREAM_DESTROYED" ||
        c === "UND_ERR_SOCKET" ||
        c.startsWith("ERR_HTTP2_"),
    ) ||
    messages.some(
      (m) =>
        m.startsWith("http/2 stream closed") ||
        m.startsWith("protocol error: missing") ||
        m === "fetch failed" ||
        // Keepalive: the connection stopped answering PINGs (its host vanished, a network cut).
        m === "PING timed out" ||
        m.includes("terminated") ||
        m.includes("other side closed") ||
        m.includes("socket hang up") ||
        m.includes("premature close"),
    )
  );
}

/** What to tell a person about a TLS failure a certificate caused; undefined for others. */
function certificateProblem(codes: string[], messages: string[]): string | undefined {
  const text = [...codes, ...messages].join(" ").toUpperCase();
  if (text.includes("CERTIFICATE_REQUIRED") || text.includes("CERTIFICATE REQUIRED")) {
    return "the daemon requires a client certificate: give the `clientCert` and `clientKey` options";
  }
  for (const alert of ["BAD_CERTIFICATE", "UNKNOWN_CA", "CERTIFICATE_UNKNOWN", "DECRYPT_ERROR", "ACCESS_DENIED", "CERTIFICATE_EXPIRED", "UNSUPPORTED_CERTIFICATE", "CERTIFICATE_REVOKED"]) {
    if (codes.some((c) => c.startsWith("ERR_SSL_") && c.endsWith(alert))) {
      return (
        `the daemon does not accept this client's certificate (${alert}): is \`clientCert\` ` +
        "signed by the CA the daemon trusts for clients?"
      );
    }
  }
  const serverCert = [
    "UNABLE_TO_VERIFY_LEAF_SIGNATURE",
    "SELF_SIGNED_CERT_IN_CHAIN",
    "DEPTH_ZERO_SELF_SIGNED_CERT",
    "UNABLE_TO_GET_ISSUER_CERT",
    "UNABLE_TO_GET_ISSUER_CERT_LOCALLY",
    "CERT_HAS_EXPIRED",
    "CERT_NOT_YET_VALID",
    "ERR_TLS_CERT_ALTNAME_INVALID",
    "CERT_SIGNATURE_FAILURE",
  ].find((c) => codes.includes(c));
  if (serverCert !== undefined) {
    return (
      `the daemon's certificate is not valid for this client (${serverCert}): is \`caCert\` the ` +
      "CA that signed it, and does it name the host in the address?"
    );
  }
  if (codes.some((c) => c === "ERR_SSL_WRONG_VERSION_NUMBER" || c === "EPROTO")) {
    return "the server does not speak TLS there: address a plaintext daemon with http://";
  }
  return undefined;
}


/**
 * The one mapping of a failed call to an AirlockError: a status the daemon sent becomes the
 * class of its code (with the field its message names), a failure of the transport becomes
 * UnreachableError, ConnectionLostError or TlsError. `method` names the call
 * (`airlock.v1.Tools/ListTools`); `aborted` says the caller's own signal ended it.
 */
export function toAirlockError(
  error: unknown,
  peer: Peer,
  method?: string,
  context: { aborted?: boolean } = {},
): AirlockError {
  if (error instanceof AirlockError) return error;
  const ce = ConnectError.from(error);
  const endpoint = peer.endpoint;
  const base = { endpoint, method, cause: error };

  if (!ce.isWireError) {
    const { codes, messages } = causeChain(error);
    // A ConnectError's message carries its code in front; its raw message is the text.
    if (error instanceof ConnectError) messages[0] = ce.rawMessage;
    const tls = certificateProblem(codes, messages);
    if (tls !== undefined) {
      return new TlsError(`TLS with airlockd at ${endpoint} failed: ${tls}`, {
        ...base,
        code: Code.Unauthenticated,
        rawMessage: tls,
      });
    }
    // What the server sent is not what airlockd sends: a message over the size airlockd
    // encodes at most (refused from its length prefix, before it is buffered), or bytes that
    // do not decode as the reply. Asking again gets the same: not retryable.
    const limit = /larger than configured readMaxBytes (\d+)/.exec(ce.rawMessage);
    if (ce.code === Code.ResourceExhausted && limit) {
      const size = /message size (\d+)/.exec(ce.rawMessage)?.[1];
      return new ResourceExhaustedError(
        `airlockd at ${endpoint} sent a message${size ? ` of ${size} bytes` : ""} over this client's ` +
          `limit of ${limit[1]} bytes, the most airlockd ever sends: is it airlockd?`,
        { ...base, code: Code.ResourceExhausted, retryable: false, rawMessage: ce.rawMessage },
      );
    }
    if (ce.code === Code.Internal && ce.rawMessage.startsWith("parse binary")) {
      return new InternalError(
        `airlockd at ${endpoint} sent a reply this client cannot read (${ce.rawMessage}): is it airlockd, ` +
          `of the same airlock.v1 as this client?`,
        { ...base, code: Code.Internal, rawMessage: ce.rawMessage },
      );
    }
    // The caller's own AbortSignal (or deadline) ended the call: not a failure of the daemon.
    if (context.aborted || ce.code === Code.DeadlineExceeded) {
      const what = ce.code === Code.DeadlineExceeded ? "ran past its deadline" : "was cancelled";
      return new CanceledError(`the call${method ? ` ${method}` : ""} ${what}`, {
        ...base,
        code: ce.code === Code.DeadlineExceeded ? Code.DeadlineExceeded : Code.Canceled,
        rawMessage: ce.rawMessage,
      });
    }
    const unreachable =
      codes.find((c) => UNREACHABLE_CODES.has(c)) ??
      (messages.some((m) => m.includes("connection establishment timed out")) ? "ETIMEDOUT" : undefined);
    if (unreachable !== undefined) {
      const reason = reasonOf(unreachable, messages);
      return new UnreachableError(`cannot reach airlockd at ${endpoint}: ${reason} — is it running?`, {
        ...base,
        code: Code.Unavailable,
        retryable: true,
        rawMessage: reason,
      });
    }
    if (isBrokenConnection(codes, messages)) {
      const reason = messages[messages.length - 1] ?? ce.rawMessage;
      return new ConnectionLostError(`lost the connection to airlockd at ${endpoint}: ${reason}`, {
        ...base,
        code: Code.Unavailable,
        retryable: true,
        rawMessage: reason,
      });
    }
  }

  const raw = ce.rawMessage.trim();
  if (ce.code === Code.Unauthenticated) {
    return new UnauthenticatedError(describeUnauthenticated(peer, raw), {
      ...base,
      code: Code.Unauthenticated,
      rawMessage: raw,
      tokenSource: peer.token,
    });
  }
  if (ce.code === Code.Unimplemented) {
    const call = method ?? "this call";
    return new UnimplementedError(
      `the daemon at ${endpoint} does not serve ${call} — it is older than this client` +
        (raw ? ` (${raw})` : ""),
      { ...base, code: Code.Unimplemented, rawMessage: raw },
    );
  }
  const known = RPC_CLASSES[ce.code];
  const text = raw || codeName(ce.code).toLowerCase().replaceAll("_", " ");
  const field = ce.isWireError ? fieldOf(raw) : undefined;
  if (known) {
    const message = ce.code === Code.Unavailable ? `airlockd at ${endpoint} is unavailable: ${text}` : text;
    return new known.cls(message, { ...base, code: ce.code, field, retryable: known.retryable, rawMessage: raw });
  }
  return new AirlockError(text, { ...base, code: ce.code, field, rawMessage: raw });
}

function reasonOf(code: string, messages: string[]): string {
  switch (code) {
    case "ECONNREFUSED":
      return "connection refused";
    case "ENOENT":
      return "no such socket";
    case "ETIMEDOUT":
      return "timed out";
    case "ENOTFOUND":
    case "EAI_AGAIN":
      return "no such host";
    case "EACCES":
    case "EPERM":
      return "permission denied";
    default:
      return messages[messages.length - 1] ?? code;
  }
}
