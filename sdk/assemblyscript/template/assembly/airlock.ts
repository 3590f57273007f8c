// The airlock stdio ABI: the arguments are one JSON object on stdin; the tool writes one
// JSON document, {"ok": ...} or {"error": {...}}, to stdout and exits 0.

import { JSONParser, JSONValue, JSONWriter, Kind, quote } from "./json";
import * as wasi from "./wasi";

/** Reads and parses the call's arguments; on failure emits the error and returns null. */
export function readArguments(): JSONValue | null {
  const input = wasi.readAll(0);
  if (input === null) {
    emitError("could not read the arguments: " + wasi.errnoMessage(wasi.lastErrno));
    return null;
  }
  const parser = new JSONParser(String.UTF8.decodeUnsafe(input.dataStart, input.length));
  const args = parser.parse();
  const error = parser.error;
  if (error !== null) {
    emitError("invalid arguments: " + error);
    return null;
  }
  if (args.kind != Kind.Object) {
    emitError("invalid arguments: not a JSON object");
    return null;
  }
  return args;
}

/** Emits `{"ok": <result>}`; `result` is JSON text, e.g. from a JSONWriter. */
export function emitOk(result: string): void {
  emit("{\"ok\":" + result + "}\n");
}

/** Emits `{"error": {"message": ..., "retryable": ...}}`. */
export function emitError(message: string, retryable: bool = false): void {
  emit("{\"error\":{\"message\":" + quote(message) + ",\"retryable\":" + (retryable ? "true" : "false") + "}}\n");
}

/** Writes to stderr, which airlock streams to the client as logs (never parsed). */
export function log(message: string): void {
  wasi.writeAll(2, String.UTF8.encode(message + "\n"));
}

function emit(text: string): void {
  wasi.writeAll(1, String.UTF8.encode(text));
}

export { JSONValue, JSONWriter, Kind };
