// wordstats: counts lines, words and bytes of the workspace files matching a pattern.
//
// A typed airlock tool: componentize-qjs turns this ES module into a WebAssembly component of
// the world in world.wit (the world `tool` of wit/tool.wit plus the WASI interfaces imported
// below). The daemon calls `call` with the arguments as JSON text (already validated against
// schema.json); the string it returns is the call's result, and throwing
// `{message, retryable}` makes the call a tool error. The engine is QuickJS: there is no
// `console`, no Node.js API and no `fs`; files are reached through wasi:filesystem, logs go
// to stderr through wasi:cli/stderr (see `log`).

import { getDirectories } from 'wasi:filesystem/preopens@0.2.12';
import { getStderr } from 'wasi:cli/stderr@0.2.12';

const CHUNK = 64 * 1024;

/** The export of the world: one call. */
export function call(args, context) {
  if (context.workspace == null) {
    throw toolError('this tool needs a workspace');
  }
  const request = JSON.parse(args);
  return JSON.stringify(run(request, openWorkspace(context.workspace)));
}

/** The error value of `call` (a tool-error record of wit/tool.wit). */
function toolError(message, retryable = false) {
  return { message, retryable };
}

/** Writes one line to the call's log (stderr), e.g. log(`counting ${path}`). */
function log(message) {
  // unescape(encodeURIComponent(s)) is the UTF-8 encoding of s, one character per byte.
  const utf8 = unescape(encodeURIComponent(String(message) + '\n'));
  const bytes = new Uint8Array(utf8.length);
  for (let i = 0; i < utf8.length; i++) bytes[i] = utf8.charCodeAt(i);
  getStderr().blockingWriteAndFlush(bytes);
}

/** The tool itself: the result of SPEC.md for one request, or a thrown tool error. */
function run(request, root) {
  const pattern = request.pattern;
  const options = request.options ?? {};
  const maxFiles = options.max_files ?? 100;
  const perFile = options.per_file ?? true;

  const found = [];
  walk(root, '', (path) => {
    if (matches(pattern, path)) found.push(path);
  });
  found.sort(byCodePoint);
  if (found.length === 0) {
    throw toolError(`no file matches ${pattern}`);
  }

  const files = found.slice(0, maxFiles).map((path) => ({ path, ...countFile(root, path) }));
  const totals = { files: files.length, lines: 0, words: 0, bytes: 0 };
  for (const file of files) {
    totals.lines += file.lines;
    totals.words += file.words;
    totals.bytes += file.bytes;
  }
  const result = { totals, truncated: found.length > maxFiles };
  if (perFile) result.files = files;
  return result;
}

/** The directory descriptor of the workspace, among the sandbox's preopened directories. */
function openWorkspace(workspace) {
  const preopens = getDirectories();
  for (const [descriptor, name] of preopens) {
    if (name === workspace) return descriptor;
  }
  for (const [descriptor, name] of preopens) {
    const prefix = name.endsWith('/') ? name : name + '/';
    if (workspace.startsWith(prefix)) {
      return descriptor.openAt(
        { symlinkFollow: true }, workspace.slice(prefix.length), { directory: true }, { read: true });
    }
  }
  throw toolError(`the workspace ${workspace} is not among the sandbox's directories`);
}

/**
 * Calls visit with the path ('/'-separated, relative to the workspace) of every regular file
 * under dir, descending into directories; names starting with '.' are skipped, and so are
 * entries that cannot be reached (symlinks out of the sandbox, devices).
 */
function walk(dir, prefix, visit) {
  const entries = dir.readDirectory();
  const names = [];
  for (;;) {
    const entry = entries.readDirectoryEntry();
    if (entry == null) break;
    if (!entry.name.startsWith('.')) names.push([entry.name, entry.type]);
  }
  dispose(entries);
  for (let [name, type] of names) {
    if (type === 'symbolic-link' || type === 'unknown') {
      try {
        type = dir.statAt({ symlinkFollow: true }, name).type;
      } catch {
        continue; // dangling, or pointing out of the sandbox
      }
    }
    if (type === 'directory') {
      let child;
      try {
        child = dir.openAt({ symlinkFollow: true }, name, { directory: true }, { read: true });
      } catch {
        continue;
      }
      walk(child, prefix + name + '/', visit);
      dispose(child);
    } else if (type === 'regular-file') {
      visit(prefix + name);
    }
  }
}

/** Lines, words and bytes of one file, read as bytes (SPEC.md). */
function countFile(root, path) {
  const file = root.openAt({ symlinkFollow: true }, path, {}, { read: true });
  let bytes = 0, lines = 0, words = 0, inWord = false, last = -1;
  for (;;) {
    const [chunk, end] = file.read(CHUNK, bytes); // u64 arguments are numbers in QuickJS
    for (let i = 0; i < chunk.length; i++) {
      const byte = chunk[i];
      if (byte === 10) lines++;
      // ASCII whitespace: space, and \t \n \v \f \r (9 to 13).
      if (byte === 32 || (byte >= 9 && byte <= 13)) {
        inWord = false;
      } else if (!inWord) {
        inWord = true;
        words++;
      }
    }
    if (chunk.length > 0) last = chunk[chunk.length - 1];
    bytes += chunk.length;
    if (end || chunk.length === 0) break;
  }
  dispose(file);
  if (bytes > 0 && last !== 10) lines++;
  return { lines, words, bytes };
}

/** `*` matches any run of characters (`/` included), `?` exactly one, anything else itself. */
function matches(pattern, path) {
  const p = Array.from(pattern), s = Array.from(path); // by code point, not UTF-16 unit
  let i = 0, j = 0, star = -1, mark = 0;
  while (j < s.length) {
    if (i < p.length && (p[i] === '?' || (p[i] !== '*' && p[i] === s[j]))) {
      i++; j++;
    } else if (i < p.length && p[i] === '*') {
      star = i++; mark = j;
    } else if (star >= 0) {
      i = star + 1; j = ++mark;
    } else {
      return false;
    }
  }
  while (i < p.length && p[i] === '*') i++;
  return i === p.length;
}

/**
 * Byte order of the UTF-8 encodings, which is code point order. JavaScript's own `<` compares
 * UTF-16 units, which puts U+E000..U+FFFF after the surrogates of U+10000 and above: moving
 * the surrogates above that range fixes it.
 */
function byCodePoint(a, b) {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const x = a.charCodeAt(i), y = b.charCodeAt(i);
    if (x !== y) return unitRank(x) - unitRank(y);
  }
  return a.length - b.length;
}

function unitRank(unit) {
  if (unit >= 0xd800 && unit <= 0xdfff) return unit + 0x2000;
  return unit >= 0xe000 ? unit - 0x800 : unit;
}

/** Drops a WASI resource now rather than when the call ends. */
function dispose(resource) {
  resource[Symbol.dispose]?.();
}
