// The daemon's API in the browser: the descriptor set it serves (/airlock.binpb) is the one
// source of truth — no generated code. This module loads it into a registry, makes gRPC-Web
// clients for Agent, Tools, Daemon and Policy over one same-origin transport that carries the
// access token, names enum values, and turns RPC failures into messages for the page.

import { createFileRegistry, fromBinary } from "@bufbuild/protobuf";
import { FileDescriptorSetSchema } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcWebTransport } from "@connectrpc/connect-web";
import { getToken, signOut } from "./auth.js";
import { capitalise, enumShortName, enumWords } from "./format.js";

export { Code };

/** @type {import("@bufbuild/protobuf").FileRegistry | null} */
let registry = null;

/** The clients; set by init(). */
export const api = { agent: null, tools: null, daemon: null, policy: null };

/** Fetches the descriptor set and makes the clients. Throws with a readable message. */
export async function init() {
  let bytes;
  try {
    // Preloaded by index.html, in parallel with this script.
    const res = await fetch("/airlock.binpb");
    if (!res.ok) throw new Error(`HTTP ${res.status} ${res.statusText}`.trim());
    bytes = new Uint8Array(await res.arrayBuffer());
  } catch (err) {
    throw new Error(`Cannot load the API description (/airlock.binpb): ${err.message}`);
  }
  registry = createFileRegistry(fromBinary(FileDescriptorSetSchema, bytes));
  const transport = createGrpcWebTransport({
    baseUrl: location.origin,
    useBinaryFormat: true,
    interceptors: [authInterceptor],
  });
  const service = (name) => {
    const desc = registry.getService(name);
    if (!desc) throw new Error(`The daemon's API description has no service ${name}`);
    return createClient(desc, transport);
  };
  api.agent = service("airlock.v1.Agent");
  api.tools = service("airlock.v1.Tools");
  api.daemon = service("airlock.v1.Daemon");
  api.policy = service("airlock.v1.Policy");
}

/**
 * Sets `authorization: Bearer …` on every call, and sends the user back to the sign-in form
 * with the server's message when a call (or a stream, at any point) fails UNAUTHENTICATED.
 */
function authInterceptor(next) {
  return async (req) => {
    const token = getToken();
    if (token) req.header.set("authorization", `Bearer ${token}`);
    let res;
    try {
      res = await next(req);
    } catch (err) {
      throw checkAuth(err);
    }
    if (!res.stream) return res;
    return { ...res, message: watchStream(res.message) };
  };
}

async function* watchStream(messages) {
  try {
    yield* messages;
  } catch (err) {
    throw checkAuth(err);
  }
}

function checkAuth(err) {
  const e = ConnectError.from(err);
  if (e.code === Code.Unauthenticated) {
    signOut(e.rawMessage || "Sign in again: the daemon did not accept the access token.");
  }
  return e;
}

/** The descriptor of an enum, e.g. "airlock.v1.RunState". */
export function enumDesc(typeName) {
  return registry?.getEnum(typeName);
}

/** An enum value's name without its prefix: enumName("airlock.v1.RunState", 2) → "WAITING_FOR_APPROVAL". */
export function enumName(typeName, value) {
  return enumShortName(enumDesc(typeName), value);
}

/** An enum value as lowercase words: "waiting for approval"; "" for UNSPECIFIED. */
export function enumLabel(typeName, value) {
  const name = enumName(typeName, value);
  return name === "UNSPECIFIED" ? "" : enumWords(name);
}

/** As enumLabel, capitalised: "Waiting for approval". */
export function enumTitle(typeName, value) {
  return capitalise(enumLabel(typeName, value));
}

/** The number of an enum value from its short name ("FINISHED" → 3), or 0. */
export function enumNumber(typeName, shortName) {
  const desc = enumDesc(typeName);
  const v = desc?.values.find((value) => enumShortName(desc, value.number) === shortName);
  return v ? v.number : 0;
}

const CODE_NAMES = {
  [Code.Canceled]: "cancelled",
  [Code.Unknown]: "unknown error",
  [Code.InvalidArgument]: "invalid argument",
  [Code.DeadlineExceeded]: "deadline exceeded",
  [Code.NotFound]: "not found",
  [Code.AlreadyExists]: "already exists",
  [Code.PermissionDenied]: "permission denied",
  [Code.ResourceExhausted]: "resource exhausted",
  [Code.FailedPrecondition]: "failed precondition",
  [Code.Aborted]: "aborted",
  [Code.OutOfRange]: "out of range",
  [Code.Unimplemented]: "unimplemented",
  [Code.Internal]: "internal error",
  [Code.Unavailable]: "unavailable",
  [Code.DataLoss]: "data loss",
  [Code.Unauthenticated]: "unauthenticated",
};

/** The status code of a failure (Code.Unknown for anything that is no RPC error). */
export function errorCode(err) {
  return ConnectError.from(err).code;
}

/** The message to show for a failure: the server's status message, as it sent it. */
export function errorMessage(err) {
  if (err == null) return "";
  if (typeof err === "string") return err;
  const e = ConnectError.from(err);
  const raw = e.rawMessage || "";
  if (e.code === Code.Unavailable || /failed to fetch|networkerror|load failed/i.test(raw)) {
    return raw && !/failed to fetch|networkerror|load failed/i.test(raw)
      ? raw
      : "Cannot reach the daemon (the connection failed).";
  }
  return raw || capitalise(CODE_NAMES[e.code] ?? "request failed");
}

/** Whether a failure is the caller's own abort (leaving a page, closing a stream). */
export function isAbort(err, signal) {
  if (signal?.aborted) return true;
  return err?.name === "AbortError" || ConnectError.from(err).code === Code.Canceled;
}

/** Failures after which retrying a stream is pointless. */
export function isFinalError(err) {
  const code = errorCode(err);
  return (
    code === Code.Unauthenticated ||
    code === Code.NotFound ||
    code === Code.PermissionDenied ||
    code === Code.InvalidArgument
  );
}
