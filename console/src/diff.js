// Unified diff → side-by-side rows, for an approver to read a write tool's preview. Pure (no
// DOM): pages/approvals.js renders the rows as a table; test/diff.test.mjs checks them.
//
// Input is what airlock's write tools answer in preview mode (`--- a/x` / `+++ b/x` headers,
// `@@ -l,n +l,n @@` hunks, possibly several files with `diff --git` and mode lines, "\ No
// newline at end of file", a trailing "… diff truncated" note). Within a hunk the line counts
// of its header decide which lines belong to it, so a removed line that reads "-- x" is not
// taken for a file header.

const HUNK = /^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@(.*)$/;

/**
 * @typedef {{ no: number, text: string, kind: "del" | "add" | "ctx" }} Side
 * @typedef {{ type: "hunk", text: string }
 *   | { type: "line", left: Side | null, right: Side | null }
 *   | { type: "note", text: string }} Row
 * @typedef {{ oldName: string, newName: string, header: string[], rows: Row[] }} DiffFile
 */

/** Parses a unified diff into files of side-by-side rows. @returns {DiffFile[]} */
export function parseUnifiedDiff(text) {
  const files = [];
  let file = null;
  // Inside a hunk: lines still expected on each side (-1: counts unknown, go by prefix).
  let oldLeft = 0;
  let newLeft = 0;
  let oldNo = 0;
  let newNo = 0;
  let dels = [];
  let adds = [];

  const current = () => {
    if (!file) {
      file = { oldName: "", newName: "", header: [], rows: [] };
      files.push(file);
    }
    return file;
  };
  const flush = () => {
    const n = Math.max(dels.length, adds.length);
    for (let i = 0; i < n; i += 1) {
      current().rows.push({ type: "line", left: dels[i] ?? null, right: adds[i] ?? null });
    }
    dels = [];
    adds = [];
  };
  const inHunk = () => oldLeft > 0 || newLeft > 0;

  const lines = String(text ?? "").split("\n");
  // A diff ends with a newline: the empty string after it is no line.
  if (lines.length && lines[lines.length - 1] === "") lines.pop();

  for (const raw of lines) {
    const line = raw.endsWith("\r") ? raw.slice(0, -1) : raw;
    if (inHunk()) {
      const sign = line[0];
      if (sign === "\\") {
        flush();
        current().rows.push({ type: "note", text: line.slice(1).trim() });
        continue;
      }
      if (sign === "-" && oldLeft > 0) {
        if (adds.length) flush();
        dels.push({ no: oldNo, text: line.slice(1), kind: "del" });
        oldNo += 1;
        oldLeft -= 1;
        continue;
      }
      if (sign === "+" && newLeft > 0) {
        adds.push({ no: newNo, text: line.slice(1), kind: "add" });
        newNo += 1;
        newLeft -= 1;
        continue;
      }
      if ((sign === " " || line === "") && oldLeft > 0 && newLeft > 0) {
        flush();
        const body = line.slice(1);
        current().rows.push({
          type: "line",
          left: { no: oldNo, text: body, kind: "ctx" },
          right: { no: newNo, text: body, kind: "ctx" },
        });
        oldNo += 1;
        newNo += 1;
        oldLeft -= 1;
        newLeft -= 1;
        continue;
      }
      // The counts did not add up (a cut diff): leave the hunk and read the line afresh.
      oldLeft = 0;
      newLeft = 0;
    }
    flush();

    const hunk = HUNK.exec(line);
    if (hunk) {
      oldNo = Number(hunk[1]);
      newNo = Number(hunk[3]);
      oldLeft = hunk[2] === undefined ? 1 : Number(hunk[2]);
      newLeft = hunk[4] === undefined ? 1 : Number(hunk[4]);
      current().rows.push({ type: "hunk", text: line });
      continue;
    }
    if (line.startsWith("diff --git ")) {
      file = { oldName: "", newName: "", header: [line], rows: [] };
      files.push(file);
      continue;
    }
    if (line.startsWith("--- ")) {
      // A new file begins unless this is the `---` line of a `diff --git` block just opened.
      if (!file || file.oldName || file.newName || file.rows.length) {
        file = { oldName: "", newName: "", header: [], rows: [] };
        files.push(file);
      }
      file.oldName = line.slice(4);
      continue;
    }
    if (line.startsWith("+++ ") && file && !file.newName && !file.rows.length) {
      file.newName = line.slice(4);
      continue;
    }
    if (line.startsWith("\\")) {
      current().rows.push({ type: "note", text: line.slice(1).trim() });
      continue;
    }
    const f = current();
    // Lines of a file's preamble (mode, rename, index) stay in its header; others are notes.
    if (!f.rows.length && !f.oldName && !f.newName && f.header.length) f.header.push(line);
    else f.rows.push({ type: "note", text: line });
  }
  flush();
  return files;
}

/** The display name of a diff file: the new path, or the old one for a deletion. */
export function diffFileName(file) {
  const strip = (name) => name.replace(/^[ab]\//, "").replace(/\t.*$/, "");
  if (file.newName && file.newName !== "/dev/null") return strip(file.newName);
  if (file.oldName && file.oldName !== "/dev/null") return strip(file.oldName);
  const git = /^diff --git a\/(.*) b\/(.*)$/.exec(file.header[0] ?? "");
  return git ? git[2] : "";
}
