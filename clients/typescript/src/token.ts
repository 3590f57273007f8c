// The token (Node): the one given, else $AIRLOCK_TOKEN, else the file `token` in the
// daemon's default state dir — the rule of client/src/client/auth.rs, and like it, that file
// (the local daemon's token) goes only to a daemon on this host.

import { readFileSync } from "node:fs";
import { join } from "node:path";
import { type Endpoint, isLocalEndpoint } from "./endpoint.js";
import { Code, CredentialsError, TOKEN_ENV, type TokenSource } from "./errors.js";

/** The default tenant's token file in the daemon's state dir. */
export const TOKEN_FILE = "token";

/**
 * The daemon's default state dir, by the daemon's own rule: `$XDG_STATE_HOME/airlock`, else
 * `~/.local/state/airlock` (from $HOME), else `.airlock`.
 */
export function defaultStateDir(env: NodeJS.ProcessEnv = process.env): string {
  const state = env["XDG_STATE_HOME"];
  if (state) return join(state, "airlock");
  const home = env["HOME"];
  if (home) return join(home, ".local/state/airlock");
  return ".airlock";
}

/**
 * The token to send to `endpoint` and where it came from. No token when there is none to
 * send: the daemon then answers UNAUTHENTICATED, and the error says where it looked.
 *
 * A token given, or in $AIRLOCK_TOKEN, is the caller's choice and goes to any daemon. The
 * token file is the local daemon's: it is read only for a daemon on this host (a `unix:`
 * socket, `localhost`, 127.0.0.0/8 or ::1), never sent to an address elsewhere, where a
 * mistyped or hostile server — over plaintext http://, anyone on the path — would get it.
 * Without `endpoint` the file is not withheld (for callers that only ask what would be sent).
 */
export function discoverToken(
  given?: string,
  env: NodeJS.ProcessEnv = process.env,
  endpoint?: Endpoint,
): { token: string | undefined; source: TokenSource } {
  const trimmed = given?.trim();
  if (trimmed) return { token: checked(trimmed), source: { kind: "given" } };
  const fromEnv = env[TOKEN_ENV]?.trim();
  if (fromEnv) return { token: checked(fromEnv), source: { kind: "environment" } };
  const path = join(defaultStateDir(env), TOKEN_FILE);
  if (endpoint !== undefined && !isLocalEndpoint(endpoint)) {
    return { token: undefined, source: { kind: "withheld", path, endpoint: endpoint.display } };
  }
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") {
      return { token: undefined, source: { kind: "missing", lookedIn: path } };
    }
    throw new CredentialsError(
      `cannot read the token file ${path}: ${(error as Error).message}; pass the \`token\` option or set ${TOKEN_ENV} instead`,
      { code: Code.InvalidArgument, cause: error },
    );
  }
  const token = text.trim();
  if (!token) return { token: undefined, source: { kind: "missing", lookedIn: path } };
  return { token: checked(token), source: { kind: "file", path } };
}

/** A token goes in a header: printable ASCII only. */
function checked(token: string): string {
  if (!/^[\x21-\x7e]+$/.test(token)) {
    throw new CredentialsError("the token is not printable ASCII", { code: Code.InvalidArgument });
  }
  return token;
}
