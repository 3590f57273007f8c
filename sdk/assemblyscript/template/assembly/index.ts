// wordstats: counts lines, words and bytes of the workspace files matching a pattern.
// The arguments arrive on stdin as JSON (see schema.json); one JSON result goes to stdout.

import { emitError, emitOk, readArguments } from "./airlock";
import { JSONWriter, Kind } from "./json";
import * as wasi from "./wasi";

/** The pattern's characters as code points: `*` any run of characters, `?` exactly one. */
function codePoints(s: string): Array<i32> {
  const out = new Array<i32>();
  for (let i = 0; i < s.length; i++) {
    const c = s.codePointAt(i);
    out.push(c);
    if (c > 0xffff) i++;
  }
  return out;
}

/** A path's bytes as code points: UTF-8 decoded, any other byte b as 0xDC00 + b. */
function decodePath(b: Uint8Array): Array<i32> {
  const out = new Array<i32>();
  let i = 0;
  while (i < b.length) {
    const c0 = <i32>b[i];
    let need = 0;
    let lo = 0x80, hi = 0xbf;
    let cp = c0;
    if (c0 >= 0xc2 && c0 <= 0xdf) { need = 1; cp = c0 & 0x1f; }
    else if (c0 >= 0xe0 && c0 <= 0xef) {
      need = 2; cp = c0 & 0x0f;
      if (c0 == 0xe0) lo = 0xa0; else if (c0 == 0xed) hi = 0x9f;
    } else if (c0 >= 0xf0 && c0 <= 0xf4) {
      need = 3; cp = c0 & 0x07;
      if (c0 == 0xf0) lo = 0x90; else if (c0 == 0xf4) hi = 0x8f;
    } else if (c0 >= 0x80) need = -1;
    let ok = need >= 0;
    for (let k = 1; ok && k <= need; k++) {
      if (i + k >= b.length) { ok = false; break; }
      const c = <i32>b[i + k];
      if (c < (k == 1 ? lo : 0x80) || c > (k == 1 ? hi : 0xbf)) ok = false;
      else cp = (cp << 6) | (c & 0x3f);
    }
    if (ok) { out.push(cp); i += need + 1; }
    else { out.push(0xdc00 + c0); i++; }
  }
  return out;
}

/** Whether the whole of `path` matches `pattern`. */
function matches(pattern: Array<i32>, path: Array<i32>): bool {
  let p = 0, s = 0, star = -1, mark = 0;
  while (s < path.length) {
    if (p < pattern.length && pattern[p] == 0x2a) { star = p++; mark = s; }
    else if (p < pattern.length && (pattern[p] == 0x3f || pattern[p] == path[s])) { p++; s++; }
    else if (star >= 0) { p = star + 1; s = ++mark; }
    else return false;
  }
  while (p < pattern.length && pattern[p] == 0x2a) p++;
  return p == pattern.length;
}

function join(prefix: Uint8Array, name: Uint8Array): Uint8Array {
  const out = new Uint8Array(prefix.length + name.length);
  out.set(prefix);
  out.set(name, prefix.length);
  return out;
}

const SLASH = new Uint8Array(1);
SLASH[0] = 0x2f;

/** A path for people and JSON: UTF-8 decoded, any byte that is not UTF-8 as U+FFFD. */
function display(path: Uint8Array): string {
  const points = decodePath(path);
  const units = new Array<i32>();
  for (let i = 0; i < points.length; i++) {
    let cp = points[i];
    if (cp >= 0xdc80 && cp <= 0xdcff) cp = 0xfffd; // an escaped byte (UTF-8 never decodes to these)
    if (cp > 0xffff) {
      units.push(0xd800 + ((cp - 0x10000) >> 10));
      units.push(0xdc00 + ((cp - 0x10000) & 0x3ff));
    } else units.push(cp);
  }
  return String.fromCharCodes(units);
}

/** Byte order. */
function compareBytes(a: Uint8Array, b: Uint8Array): i32 {
  const n = min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    if (a[i] != b[i]) return <i32>a[i] - <i32>b[i];
  }
  return a.length - b.length;
}

let walkError: string | null = null;

/** Adds to `found` the regular files under `prefix` (a directory's path and "/", or empty)
 *  whose path matches; entries whose name starts with "." are skipped. False on an error. */
function walk(root: u32, prefix: Uint8Array, pattern: Array<i32>, found: Array<Uint8Array>): bool {
  const fd = prefix.length == 0 ? <i32>root : wasi.openDir(root, prefix.subarray(0, prefix.length - 1));
  let entries: Array<wasi.DirEntry> | null = null;
  if (fd >= 0) {
    entries = wasi.readDir(<u32>fd);
    if (<u32>fd != root) wasi.close(<u32>fd);
  }
  if (entries === null) {
    walkError = "cannot read the folder " + (prefix.length == 0 ? "." : display(prefix)) + ": " +
                wasi.errnoMessage(wasi.lastErrno);
    return false;
  }
  for (let i = 0; i < entries.length; i++) {
    const entry = entries[i];
    if (entry.name.length == 0 || entry.name[0] == 0x2e) continue;
    const path = join(prefix, entry.name);
    let type = <i32>entry.type;
    if (type == wasi.FILETYPE_SYMBOLIC_LINK) {
      // A link to a file inside the workspace counts as that file; links to folders are not
      // followed (no loops) and links that lead out of the workspace fail and are skipped.
      type = wasi.fileType(root, path);
      if (type == wasi.FILETYPE_DIRECTORY) continue;
    } else if (type == wasi.FILETYPE_UNKNOWN) {
      type = wasi.fileType(root, path);
    }
    if (type == wasi.FILETYPE_DIRECTORY) {
      if (!walk(root, join(path, SLASH), pattern, found)) return false;
    } else if (type == wasi.FILETYPE_REGULAR_FILE && matches(pattern, decodePath(path))) {
      found.push(path);
    }
  }
  return true;
}

class Counts {
  lines: u64 = 0;
  words: u64 = 0;
  bytes: u64 = 0;
}

const buffer = new Uint8Array(65536);

/** Counts a file by reading its bytes (never decoded); null on failure. */
function count(root: u32, path: Uint8Array): Counts | null {
  const fd = wasi.openFile(root, path);
  if (fd < 0) return null;
  const counts = new Counts();
  let inWord = false;
  let last: u8 = 0x0a;
  while (true) {
    const n = wasi.read(<u32>fd, buffer);
    if (n < 0) { wasi.close(<u32>fd); return null; }
    if (n == 0) break;
    for (let i = 0; i < n; i++) {
      const b = unchecked(buffer[i]);
      if (b == 0x20 || (b >= 0x09 && b <= 0x0d)) {
        inWord = false;
        if (b == 0x0a) counts.lines++;
      } else if (!inWord) {
        inWord = true;
        counts.words++;
      }
    }
    counts.bytes += <u64>n;
    last = buffer[n - 1];
  }
  wasi.close(<u32>fd);
  if (last != 0x0a) counts.lines++; // a last line without "\n" (an empty file keeps last = "\n")
  return counts;
}

function main(): void {
  const args = readArguments();
  if (args === null) return;

  const patternValue = args.get("pattern");
  if (patternValue === null || patternValue.kind != Kind.String) {
    emitError("invalid arguments: `pattern` must be a string");
    return;
  }
  const pattern = patternValue.str;
  let maxFiles: f64 = 100;
  let perFile = true;
  const options = args.get("options");
  if (options !== null) {
    const max = options.get("max_files");
    if (max !== null && max.kind == Kind.Number) maxFiles = max.num;
    const per = options.get("per_file");
    if (per !== null && per.kind == Kind.Bool) perFile = per.bool;
  }

  // The workspace is preopened as "." (the current directory of a stdio tool).
  const root = wasi.findPreopen(".");
  if (root < 0) {
    emitError("this tool needs a workspace");
    return;
  }
  const found = new Array<Uint8Array>();
  if (!walk(<u32>root, new Uint8Array(0), codePoints(pattern), found)) {
    emitError(walkError!);
    return;
  }
  if (found.length == 0) {
    emitError("no file matches " + pattern);
    return;
  }
  found.sort(compareBytes);

  const counted = maxFiles < <f64>found.length ? <i32>maxFiles : found.length;
  const files = new JSONWriter().beginArray();
  const totals = new Counts();
  for (let i = 0; i < counted; i++) {
    const path = found[i];
    const counts = count(<u32>root, path);
    if (counts === null) {
      emitError("cannot read " + display(path) + ": " + wasi.errnoMessage(wasi.lastErrno));
      return;
    }
    totals.lines += counts.lines;
    totals.words += counts.words;
    totals.bytes += counts.bytes;
    files.beginObject()
      .key("path").string(display(path))
      .key("lines").uint(counts.lines)
      .key("words").uint(counts.words)
      .key("bytes").uint(counts.bytes)
      .endObject();
  }
  files.endArray();

  const result = new JSONWriter().beginObject()
    .key("totals").beginObject()
      .key("files").int(counted)
      .key("lines").uint(totals.lines)
      .key("words").uint(totals.words)
      .key("bytes").uint(totals.bytes)
    .endObject()
    .key("truncated").bool(counted < found.length);
  if (perFile) result.key("files").raw(files.toString());
  emitOk(result.endObject().toString());
}

main();
