// connect() (Node): parses the address, finds the token, makes the gRPC (HTTP/2) transport
// that sends it on every call, and checks the connection now (GetInfo) so that an address
// where nothing listens fails here, as UnreachableError, rather than at the first call.

import * as tls from "node:tls";
import { AirlockClient } from "./client.js";
import { bearer, type Context } from "./context.js";
import { getInfo } from "./daemon.js";
import { CanceledError, Code, ConnectionLostError, TlsError, UnreachableError } from "./errors.js";
import type { DaemonInfo } from "./gen/airlock/v1/daemon_pb.js";
import { DEFAULT_ENDPOINT, nodeTransport, parseEndpoint, type TransportOptions } from "./endpoint.js";
import { discoverToken } from "./token.js";

export interface ConnectOptions extends TransportOptions {
  /**
   * The access token; unset: $AIRLOCK_TOKEN, else the daemon's default state dir's `token` —
   * that file only for a daemon on this host (unix:, localhost, 127.0.0.0/8, ::1).
   */
  token?: string | undefined;
  /** Ask the daemon (GetInfo) while connecting; default true. */
  verify?: boolean;
}

/**
 * Connects to the daemon at `endpoint`: `http://host:port`, `https://host:port`, `unix:/path`
 * or a bare `host:port` (= http). Unset: $AIRLOCK_SERVER, else http://127.0.0.1:7411. TLS
 * files default to $AIRLOCK_TLS_CA, $AIRLOCK_TLS_CERT and $AIRLOCK_TLS_KEY, as the CLI's do.
 */
export async function connect(endpoint?: string, options: ConnectOptions = {}): Promise<AirlockClient> {
  const env = process.env;
  const address = parseEndpoint(endpoint ?? (env["AIRLOCK_SERVER"] || DEFAULT_ENDPOINT));
  const { token, source } = discoverToken(options.token, env, address);
  const tlsFromEnv = address.kind === "tcp" && address.tls;
  const { transport, session } = nodeTransport(
    address,
    {
      ...options,
      caCert: options.caCert ?? (tlsFromEnv ? env["AIRLOCK_TLS_CA"] || undefined : undefined),
      clientCert: options.clientCert ?? (tlsFromEnv ? env["AIRLOCK_TLS_CERT"] || undefined : undefined),
      clientKey: options.clientKey ?? (tlsFromEnv ? env["AIRLOCK_TLS_KEY"] || undefined : undefined),
    },
    [bearer(token)],
  );
  const ctx: Context = { transport, peer: { endpoint: address.display, token: source } };
  const close = () => session.abort();
  let info: DaemonInfo | undefined;
  if (options.verify ?? true) {
    try {
      info = await getInfo(ctx, { timeoutMs: options.connectTimeoutMs ?? 10_000 });
    } catch (error) {
      close();
      // A plaintext HTTP/2 preface sent to a TLS daemon breaks the connection without a word:
      // ask in TLS whether that is what listens there.
      if (error instanceof ConnectionLostError && address.kind === "tcp" && !address.tls) {
        const url = new URL(address.baseUrl);
        if (await speaksTls(url.hostname, Number(url.port || 80))) {
          throw new TlsError(
            `airlockd at ${address.display} serves TLS: address it as https://${url.host} and give the \`caCert\` option`,
            { code: Code.Unauthenticated, endpoint: address.display, cause: error },
          );
        }
      }
      if (error instanceof CanceledError && error.code === Code.DeadlineExceeded) {
        throw new UnreachableError(`cannot reach airlockd at ${address.display}: it did not answer in time — is it running?`, {
          code: Code.Unavailable,
          retryable: true,
          endpoint: address.display,
          cause: error,
        });
      }
      throw error;
    }
  }
  return new AirlockClient(ctx, close, info);
}

/** Whether the server at host:port answers a TLS ClientHello with a TLS handshake. */
function speaksTls(host: string, port: number, timeoutMs = 3000): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = tls.connect({ host, port, rejectUnauthorized: false, ALPNProtocols: ["h2"], servername: sniName(host) });
    const done = (answer: boolean) => {
      clearTimeout(timer);
      socket.destroy();
      resolve(answer);
    };
    const timer = setTimeout(() => done(false), timeoutMs);
    socket.once("secureConnect", () => done(true));
    // An alert (a certificate the daemon wants) is TLS too; a record that is not TLS is not.
    socket.once("error", (error: NodeJS.ErrnoException) =>
      done(typeof error.code === "string" && error.code.startsWith("ERR_SSL_") && !error.code.includes("WRONG_VERSION")),
    );
  });
}

/** The SNI name: none for an IP address. */
function sniName(host: string): string | undefined {
  return /^[\d.]+$/.test(host) || host.includes(":") ? undefined : host;
}
