// Test support: a fake "daemon" that speaks raw gRPC over HTTP/2 (node:http2, plaintext) and
// answers each call as the test says — to see what the client sends (its headers), and how
// it bears what no airlockd sends (oversized messages, bytes that do not decode) — and a TCP
// proxy that can freeze, holding both connections open while nothing passes (a daemon whose
// host vanished without a reset).

import * as http2 from "node:http2";
import * as net from "node:net";

/** What one call sent: its path (`/airlock.v1.Daemon/GetInfo`) and request headers. */
export interface SeenCall {
  path: string;
  headers: http2.IncomingHttpHeaders;
}

export type Answer = (stream: http2.ServerHttp2Stream, path: string) => void;

export interface FakeDaemon {
  port: number;
  calls: SeenCall[];
  close(): Promise<void>;
}

/** Serves on all interfaces (host "::" or "0.0.0.0"), so it is reachable on any local address. */
export async function fakeDaemon(answer: Answer, host = "0.0.0.0"): Promise<FakeDaemon> {
  const calls: SeenCall[] = [];
  const server = http2.createServer();
  const sessions = new Set<http2.ServerHttp2Session>();
  server.on("session", (session) => {
    sessions.add(session);
    session.once("close", () => sessions.delete(session));
  });
  server.on("stream", (stream, headers) => {
    const path = String(headers[":path"]);
    calls.push({ path, headers });
    stream.on("error", () => undefined);
    stream.resume();
    answer(stream, path);
  });
  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  const address = server.address();
  const port = typeof address === "object" && address ? address.port : 0;
  return {
    port,
    calls,
    close: () =>
      new Promise<void>((resolve) => {
        for (const session of sessions) session.destroy();
        server.close(() => resolve());
      }),
  };
}

/** One gRPC message envelope: flags 0, the length (big-endian), the bytes. */
export function envelope(message: Uint8Array, claimedLength = message.length): Uint8Array {
  const out = new Uint8Array(5 + message.length);
  new DataView(out.buffer).setUint32(1, claimedLength);
  out.set(message, 5);
  return out;
}

/** Answers with `messages`, then the status in trailers. */
export function reply(stream: http2.ServerHttp2Stream, messages: Uint8Array[], status = 0, message = ""): void {
  stream.respond({ ":status": 200, "content-type": "application/grpc" }, { waitForTrailers: true });
  stream.once("wantTrailers", () =>
    stream.sendTrailers({ "grpc-status": String(status), "grpc-message": encodeURIComponent(message) }),
  );
  for (const m of messages) stream.write(envelope(m));
  stream.end();
}

/** Answers with a status and nothing else (a trailers-only response). */
export function refuse(stream: http2.ServerHttp2Stream, status: number, message: string): void {
  stream.respond(
    {
      ":status": 200,
      "content-type": "application/grpc",
      "grpc-status": String(status),
      "grpc-message": encodeURIComponent(message),
    },
    { endStream: true },
  );
}

export interface Proxy {
  port: number;
  /** Stops passing bytes either way; the connections stay open. */
  freeze(): void;
  close(): Promise<void>;
}

/** A TCP proxy to 127.0.0.1:`target`. */
export async function tcpProxy(target: number): Promise<Proxy> {
  const sockets = new Set<net.Socket>();
  let frozen = false;
  const server = net.createServer((inbound) => {
    const outbound = net.connect(target, "127.0.0.1");
    for (const socket of [inbound, outbound]) {
      sockets.add(socket);
      socket.on("error", () => undefined);
      socket.once("close", () => sockets.delete(socket));
    }
    inbound.on("data", (chunk) => {
      if (!frozen) outbound.write(chunk);
    });
    outbound.on("data", (chunk) => {
      if (!frozen) inbound.write(chunk);
    });
    inbound.once("end", () => outbound.end());
    outbound.once("end", () => inbound.end());
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  return {
    port: typeof address === "object" && address ? address.port : 0,
    freeze: () => {
      frozen = true;
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}
