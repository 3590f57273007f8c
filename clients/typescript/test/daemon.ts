// Test support: a real airlockd, started by the test itself ($AIRLOCKD, default the repo's
// target/debug/airlockd) with cwd the repo root, its own state dir and a workspace root
// holding ROOT/project; ready once STATE/token is written and the address accepts
// connections; stopped with SIGTERM (SIGKILL if it lingers).

import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, mkdirSync, readFileSync, rmSync, realpathSync } from "node:fs";
import * as net from "node:net";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

/** The repository root: this file is clients/typescript/dist/test/daemon.js once compiled. */
export const REPO = process.env["AIRLOCK_REPO"] ?? resolve(dirname(fileURLToPath(import.meta.url)), "../../../..");
export const AIRLOCKD = process.env["AIRLOCKD"] ?? join(REPO, "target/debug/airlockd");

export interface DaemonOptions {
  /** Listen on a Unix socket instead of TCP. */
  unix?: boolean;
  /** Serve TLS with this certificate and key. */
  tlsCert?: string;
  tlsKey?: string;
  /** Require client certificates signed by this CA. */
  tlsClientCa?: string;
  /** Reuse this state dir (and workspace root) — a restarted daemon. */
  stateDir?: string;
  root?: string;
  /** Reuse this address. */
  listen?: string;
}

export interface Daemon {
  /** What --listen was given: `127.0.0.1:PORT` or `unix:/path`. */
  listen: string;
  /** The address a client connects to: http(s)://127.0.0.1:PORT or unix:/path. */
  endpoint: string;
  port: number;
  token: string;
  stateDir: string;
  root: string;
  /** ROOT/project, the workspace the tests use. */
  workspace: string;
  /** What the daemon logged so far. */
  log(): string;
  /** SIGTERM, then SIGKILL after 5 s; resolves once it exited. */
  stop(signal?: NodeJS.Signals): Promise<void>;
  /** Stops it and removes its directories. */
  dispose(): Promise<void>;
}

/** A TCP port nothing listens on now. */
export async function freePort(host = "127.0.0.1"): Promise<number> {
  return new Promise((resolvePort, reject) => {
    const server = net.createServer();
    server.once("error", reject);
    server.listen(0, host, () => {
      const address = server.address();
      const port = typeof address === "object" && address ? address.port : 0;
      server.close(() => resolvePort(port));
    });
  });
}

function canConnect(target: { port: number } | { path: string }): Promise<boolean> {
  return new Promise((resolveOk) => {
    const socket = "path" in target ? net.connect(target.path) : net.connect(target.port, "127.0.0.1");
    socket.once("connect", () => {
      socket.destroy();
      resolveOk(true);
    });
    socket.once("error", () => resolveOk(false));
  });
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Daemons still running: killed if the test process exits without stopping them. */
const running = new Set<ChildProcess>();
process.once("exit", () => {
  for (const child of running) child.kill("SIGKILL");
});

export async function startDaemon(options: DaemonOptions = {}): Promise<Daemon> {
  if (!existsSync(AIRLOCKD)) throw new Error(`no airlockd at ${AIRLOCKD}: build it, or set AIRLOCKD`);
  const base = options.stateDir ? undefined : realpathSync(mkdtempSync(join(tmpdir(), "airlock-ts-")));
  const stateDir = options.stateDir ?? join(base as string, "state");
  const root = options.root ?? join(base as string, "root");
  const workspace = join(root, "project");
  mkdirSync(workspace, { recursive: true });
  mkdirSync(stateDir, { recursive: true });
  let listen = options.listen;
  let port = 0;
  if (!listen) {
    if (options.unix) {
      listen = `unix:${join(base ?? stateDir, "airlockd.sock")}`;
    } else {
      port = await freePort();
      listen = `127.0.0.1:${port}`;
    }
  } else if (!listen.startsWith("unix:")) {
    port = Number(listen.split(":").pop());
  }
  const args = ["--listen", listen, "--state-dir", stateDir, "--workspace-root", root, "--no-console"];
  if (options.tlsCert && options.tlsKey) args.push("--tls-cert", options.tlsCert, "--tls-key", options.tlsKey);
  if (options.tlsClientCa) args.push("--tls-client-ca", options.tlsClientCa);
  const env: NodeJS.ProcessEnv = { ...process.env, AIRLOCK_LOG: "info" };
  for (const name of ["AIRLOCK_TOKEN", "AIRLOCK_SERVER", "AIRLOCK_TLS_CA", "AIRLOCK_TLS_CERT", "AIRLOCK_TLS_KEY"]) {
    delete env[name];
  }
  const child: ChildProcess = spawn(AIRLOCKD, args, { cwd: REPO, env, stdio: ["ignore", "pipe", "pipe"] });
  running.add(child);
  let output = "";
  child.stdout?.on("data", (chunk: Buffer) => (output += chunk.toString()));
  child.stderr?.on("data", (chunk: Buffer) => (output += chunk.toString()));
  let exited: number | string | null | undefined;
  const exit = new Promise<void>((resolveExit) =>
    child.once("exit", (code, signal) => {
      exited = code ?? signal;
      running.delete(child);
      resolveExit();
    }),
  );
  const stop = async (signal: NodeJS.Signals = "SIGTERM") => {
    if (exited !== undefined) return;
    child.kill(signal);
    const killer = setTimeout(() => child.kill("SIGKILL"), 5000);
    await exit;
    clearTimeout(killer);
  };
  try {
    const tokenFile = join(stateDir, "token");
    const deadline = Date.now() + 30_000;
    const target = listen.startsWith("unix:") ? { path: listen.slice(5) } : { port };
    for (;;) {
      if (exited !== undefined) throw new Error(`airlockd exited (${exited}) while starting:\n${output}`);
      if (Date.now() > deadline) throw new Error(`airlockd did not start within 30 s:\n${output}`);
      const written = existsSync(tokenFile) && readFileSync(tokenFile, "utf8").trim() !== "";
      if (written && (await canConnect(target))) break;
      await sleep(50);
    }
  } catch (error) {
    await stop("SIGKILL");
    throw error;
  }
  const token = readFileSync(join(stateDir, "token"), "utf8").trim();
  const scheme = options.tlsCert ? "https" : "http";
  const endpoint = listen.startsWith("unix:") ? listen : `${scheme}://127.0.0.1:${port}`;
  return {
    listen,
    endpoint,
    port,
    token,
    stateDir,
    root,
    workspace,
    log: () => output,
    stop,
    async dispose() {
      await stop();
      if (base) rmSync(base, { recursive: true, force: true });
    },
  };
}

/** The scripted model's transcript: write `content` to `path`, then say how that went. */
export function writeScript(path: string, content: string): string {
  return JSON.stringify({
    turns: [
      { tool_calls: [{ name: "write_file", arguments: { path, content } }] },
      {
        alternatives: [
          { when: { status: "OK" }, final: "written" },
          { when: { contains: "not in ts" }, final: "the approver said no" },
          { final: "something else happened" },
        ],
      },
    ],
  });
}

/** Rejects after `ms` with `what` unless `promise` settles first. */
export async function within<T>(ms: number, what: string, promise: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms: ${what}`)), ms);
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}
