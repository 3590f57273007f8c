// The token (Node): the one given, else $AIRLOCK_TOKEN, else the file `token` in the
// daemon's default state dir — exactly the rule of client/src/client/auth.rs.

import { readFileSync } from "node:fs";
import { join } from "node:path";
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
 * The token to send and where it came from. No token when there is none anywhere: the daemon
 * then answers UNAUTHENTICATED, and the error says where it looked.
 */
export function discoverToken(
  given?: string,
  env: NodeJS.ProcessEnv = process.env,
): { token: string | undefined; source: TokenSource } {
  const trimmed = given?.trim();
  if (trimmed) return { token: checked(trimmed), source: { kind: "given" } };
  const fromEnv = env[TOKEN_ENV]?.trim();
  if (fromEnv) return { token: checked(fromEnv), source: { kind: "environment" } };
  const path = join(defaultStateDir(env), TOKEN_FILE);
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
