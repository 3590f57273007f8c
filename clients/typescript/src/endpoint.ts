// Addresses (Node): `http://host:port`, `https://host:port`, `unix:/path` or a bare
// `host:port`, and the gRPC (HTTP/2) transport to each — TLS with the operator's CA and an
// optional client certificate, or a Unix socket through http2's createConnection.

import { readFileSync, statSync } from "node:fs";
import * as net from "node:net";
import type * as http2 from "node:http2";
import type { Interceptor, Transport } from "@connectrpc/connect";
import { createGrpcTransport, Http2SessionManager } from "@connectrpc/connect-node";
import { Code, CredentialsError, InvalidEndpointError } from "./errors.js";

/** Where airlockd listens unless configured otherwise. */
export const DEFAULT_ENDPOINT = "http://127.0.0.1:7411";

/** A PEM file is a few kilobytes; a bound keeps a mistyped path (a log, a device) from being read whole. */
const MAX_PEM_BYTES = 1024 * 1024;

/**
 * The largest message this client reads: the daemon's own bound on what it encodes
 * (`MAX_ENCODING_MESSAGE_BYTES`, daemon/src/api/limits.rs). A reply over it is not one
 * airlockd sends; it is refused from its length prefix, before it is buffered.
 */
export const MAX_MESSAGE_BYTES = 16 * 1024 * 1024;

/** How often a connection with open streams is checked (HTTP/2 PING) unless configured. */
export const DEFAULT_KEEPALIVE_MS = 30_000;

export type Endpoint =
  | { kind: "tcp"; display: string; baseUrl: string; tls: boolean }
  | { kind: "unix"; display: string; baseUrl: string; path: string };

/** Adds the scheme people leave out, and refuses schemes this client cannot speak. */
export function parseEndpoint(raw: string): Endpoint {
  const text = raw.trim();
  const invalid = (reason: string) =>
    new InvalidEndpointError(`invalid server address ${JSON.stringify(text)}: ${reason}`, {
      code: Code.InvalidArgument,
      endpoint: text,
    });
  if (text.startsWith("unix:")) {
    let path = text.slice("unix:".length);
    if (path.startsWith("//")) path = path.slice(2);
    if (!path) throw invalid("no socket path after unix:");
    // On a Unix socket the daemon accepts any :authority; `localhost` is what most clients send.
    return { kind: "unix", display: `unix:${path}`, baseUrl: "http://localhost", path };
  }
  const scheme = /^([A-Za-z][A-Za-z0-9+.-]*):\/\//.exec(text)?.[1];
  if (scheme !== undefined && !/^https?$/i.test(scheme)) {
    throw invalid(`unsupported scheme ${JSON.stringify(scheme)}; airlockd speaks http://, https:// and unix:`);
  }
  const withScheme = scheme === undefined ? `http://${text}` : text;
  let url: URL;
  try {
    url = new URL(withScheme);
  } catch {
    throw invalid("not a URL, nor host:port");
  }
  if (!url.hostname) throw invalid("no host");
  if (url.username || url.password) throw invalid("credentials in the address; pass the `token` option");
  const tls = url.protocol === "https:";
  return { kind: "tcp", display: withScheme, baseUrl: url.origin, tls };
}

/**
 * Whether the daemon at `endpoint` is on this host: a Unix socket, `localhost`, or a loopback
 * address (127.0.0.0/8, ::1). The host is the one the connection is made to (the URL's,
 * normalised: `127.1` is 127.0.0.1), so nothing judged local here is reached elsewhere.
 */
export function isLocalEndpoint(endpoint: Endpoint): boolean {
  if (endpoint.kind === "unix") return true;
  let host = new URL(endpoint.baseUrl).hostname.toLowerCase();
  if (host.startsWith("[") && host.endsWith("]")) host = host.slice(1, -1);
  if (host === "localhost") return true;
  if (net.isIPv4(host)) return host.split(".")[0] === "127";
  return net.isIPv6(host) && host === "::1";
}

export interface TransportOptions {
  /** The CA that signed the daemon's certificate: a PEM file's path, or the PEM itself. */
  caCert?: string | undefined;
  /** This client's certificate chain (PEM path or PEM), for mutual TLS. Needs clientKey. */
  clientCert?: string | undefined;
  /** The private key of clientCert (PEM path or PEM). */
  clientKey?: string | undefined;
  /** How long to wait for the connection (TCP, TLS) to be made. Default 5000. */
  connectTimeoutMs?: number | undefined;
  /**
   * While a call is open, check the connection with an HTTP/2 PING this often (ms), and drop
   * it when the PING goes unanswered for 15 s: a daemon whose host vanished (no reset ever
   * arrives) then fails the call with ConnectionLostError — and a RunHandle re-attaches —
   * instead of waiting forever. Default 30000; 0 turns it off.
   */
  keepaliveMs?: number | undefined;
}

/**
 * A PEM given inline (anything holding a `-----BEGIN` line: `openssl pkcs12` puts "Bag
 * Attributes" before it), or read from its path (at most MAX_PEM_BYTES); `what` names it in
 * errors. An error names the path only when the value can be one: key material pasted whole
 * never ends up in a message.
 */
export function readPem(value: string, what: string): string {
  if (value.includes("-----BEGIN")) return value;
  const shown = looksLikePath(value)
    ? ` ${JSON.stringify(value)}`
    : " (the value given does not look like a path, and is not shown: a PEM needs its -----BEGIN line)";
  try {
    if (statSync(value).size > MAX_PEM_BYTES) {
      throw Object.assign(new Error(`larger than ${MAX_PEM_BYTES} bytes`), { code: "EFBIG" });
    }
    return readFileSync(value, "utf8");
  } catch (error) {
    // The fs error's message repeats the path: only its code is kept.
    const code = (error as NodeJS.ErrnoException).code;
    const reason =
      code === "ENOENT" ? "no such file" : code === "EACCES" ? "permission denied" : code === "EFBIG" ? `larger than ${MAX_PEM_BYTES} bytes` : (code ?? "unreadable");
    throw new CredentialsError(`cannot read the ${what}${shown}: ${reason}`, { code: Code.InvalidArgument });
  }
}

/** Whether `value` can be shown as a path: one short line, not a blob of base64. */
function looksLikePath(value: string): boolean {
  return (
    value.length <= 1024 &&
    !/[\x00-\x1f\x7f]/.test(value) &&
    !/^[A-Za-z0-9+/=]{40,}$/.test(value.trim().replace(/^\/+/, ""))
  );
}

/** The gRPC transport to `endpoint`, and the HTTP/2 session manager to close it with. */
export function nodeTransport(
  endpoint: Endpoint,
  options: TransportOptions,
  interceptors: Interceptor[],
): { transport: Transport; session: Http2SessionManager } {
  const nodeOptions: http2.SecureClientSessionOptions = {};
  if (endpoint.kind === "unix") {
    const path = endpoint.path;
    nodeOptions.createConnection = () => net.connect(path);
  } else if (endpoint.tls) {
    if (options.caCert) nodeOptions.ca = readPem(options.caCert, "CA certificate");
    if ((options.clientCert === undefined) !== (options.clientKey === undefined)) {
      throw new CredentialsError(
        "a client certificate goes with its key: give both `clientCert` and `clientKey`",
        { code: Code.InvalidArgument },
      );
    }
    if (options.clientCert && options.clientKey) {
      nodeOptions.cert = readPem(options.clientCert, "client certificate");
      nodeOptions.key = readPem(options.clientKey, "client key");
    }
  } else if (options.clientCert || options.clientKey || options.caCert) {
    throw new InvalidEndpointError(
      `TLS files were given for ${endpoint.display}, which is plaintext: address the daemon with https://`,
      { code: Code.InvalidArgument, endpoint: endpoint.display },
    );
  }
  const keepaliveMs = options.keepaliveMs ?? DEFAULT_KEEPALIVE_MS;
  const session = new Http2SessionManager(
    endpoint.baseUrl,
    {
      connectTimeoutMs: options.connectTimeoutMs ?? 5000,
      ...(keepaliveMs > 0 ? { pingIntervalMs: keepaliveMs, pingTimeoutMs: Math.min(15_000, keepaliveMs) } : {}),
    },
    nodeOptions,
  );
  const transport = createGrpcTransport({
    baseUrl: endpoint.baseUrl,
    sessionManager: session,
    interceptors,
    readMaxBytes: MAX_MESSAGE_BYTES,
  });
  return { transport, session };
}
