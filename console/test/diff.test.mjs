// Unit tests of src/diff.js: unified diffs as airlock's write tools preview them.
import { test } from "node:test";
import assert from "node:assert/strict";
import { parseUnifiedDiff, diffFileName } from "../src/diff.js";

const side = (no, text, kind) => ({ no, text, kind });

test("a change pairs the removed line with the added one, context on both sides", () => {
  const [file, ...rest] = parseUnifiedDiff(
    "--- a/a.txt\n+++ b/a.txt\n@@ -1,5 +1,5 @@\n 1\n 2\n-3\n+three\n 4\n 5\n",
  );
  assert.equal(rest.length, 0);
  assert.equal(file.oldName, "a/a.txt");
  assert.equal(file.newName, "b/a.txt");
  assert.equal(diffFileName(file), "a.txt");
  assert.deepEqual(file.rows, [
    { type: "hunk", text: "@@ -1,5 +1,5 @@" },
    { type: "line", left: side(1, "1", "ctx"), right: side(1, "1", "ctx") },
    { type: "line", left: side(2, "2", "ctx"), right: side(2, "2", "ctx") },
    { type: "line", left: side(3, "3", "del"), right: side(3, "three", "add") },
    { type: "line", left: side(4, "4", "ctx"), right: side(4, "4", "ctx") },
    { type: "line", left: side(5, "5", "ctx"), right: side(5, "5", "ctx") },
  ]);
});

test("a new file has only a right side", () => {
  const [file] = parseUnifiedDiff("--- /dev/null\n+++ b/src/new.rs\n@@ -0,0 +1,2 @@\n+fn main() {}\n+\n");
  assert.equal(diffFileName(file), "src/new.rs");
  assert.deepEqual(file.rows.slice(1), [
    { type: "line", left: null, right: side(1, "fn main() {}", "add") },
    { type: "line", left: null, right: side(2, "", "add") },
  ]);
});

test("unequal blocks pair what they can and leave the rest one-sided", () => {
  const [file] = parseUnifiedDiff("--- a/x\n+++ b/x\n@@ -1,3 +1,1 @@\n-a\n-b\n-c\n+z\n");
  assert.deepEqual(file.rows.slice(1), [
    { type: "line", left: side(1, "a", "del"), right: side(1, "z", "add") },
    { type: "line", left: side(2, "b", "del"), right: null },
    { type: "line", left: side(3, "c", "del"), right: null },
  ]);
});

test("hunk counts decide: a removed line starting with dashes is no file header", () => {
  const [file, ...rest] = parseUnifiedDiff("--- a/x\n+++ b/x\n@@ -1,2 +1,2 @@\n--- not a header\n+++ nor this\n keep\n");
  assert.equal(rest.length, 0);
  assert.deepEqual(file.rows.slice(1), [
    { type: "line", left: side(1, "-- not a header", "del"), right: side(1, "++ nor this", "add") },
    { type: "line", left: side(2, "keep", "ctx"), right: side(2, "keep", "ctx") },
  ]);
});

test("several hunks keep their own line numbers", () => {
  const [file] = parseUnifiedDiff(
    "--- a/x\n+++ b/x\n@@ -1,2 +1,2 @@\n a\n-b\n+B\n@@ -10,2 +10,3 @@ fn tail()\n j\n+k\n l\n",
  );
  assert.deepEqual(file.rows.map((r) => r.type), ["hunk", "line", "line", "hunk", "line", "line", "line"]);
  assert.equal(file.rows[3].text, "@@ -10,2 +10,3 @@ fn tail()");
  assert.deepEqual(file.rows[5], { type: "line", left: null, right: side(11, "k", "add") });
  assert.deepEqual(file.rows[6], { type: "line", left: side(11, "l", "ctx"), right: side(12, "l", "ctx") });
});

test("a missing final newline becomes a note", () => {
  const [file] = parseUnifiedDiff("--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-x\n\\ No newline at end of file\n+x\n");
  assert.deepEqual(file.rows.slice(1), [
    { type: "line", left: side(1, "x", "del"), right: null },
    { type: "note", text: "No newline at end of file" },
    { type: "line", left: null, right: side(1, "x", "add") },
  ]);
});

test("git diffs of several files keep each file's preamble in its header", () => {
  const files = parseUnifiedDiff(
    "diff --git a/new.txt b/new.txt\nnew file mode 100644\n--- /dev/null\n+++ b/new.txt\n@@ -0,0 +1 @@\n+hi\n" +
      "diff --git a/old.txt b/old.txt\ndeleted file mode 100644\n--- a/old.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-bye\n",
  );
  assert.equal(files.length, 2);
  assert.deepEqual(files[0].header, ["diff --git a/new.txt b/new.txt", "new file mode 100644"]);
  assert.equal(diffFileName(files[0]), "new.txt");
  assert.equal(diffFileName(files[1]), "old.txt");
  assert.deepEqual(files[1].rows.slice(1), [{ type: "line", left: side(1, "bye", "del"), right: null }]);
});

test("a rename without content change has a header and no rows", () => {
  const [file] = parseUnifiedDiff("diff --git a/a b/b\nrename from a\nrename to b\n");
  assert.deepEqual(file.header, ["diff --git a/a b/b", "rename from a", "rename to b"]);
  assert.equal(diffFileName(file), "b");
  assert.deepEqual(file.rows, []);
});

test("text that is no diff and a truncation marker become notes", () => {
  const [bin] = parseUnifiedDiff("Binary files a/logo.png and b/logo.png differ\n");
  assert.deepEqual(bin.rows, [{ type: "note", text: "Binary files a/logo.png and b/logo.png differ" }]);
  const [cut] = parseUnifiedDiff("--- a/x\n+++ b/x\n@@ -1,3 +1,3 @@\n a\n… diff truncated: 10 more bytes not shown\n");
  assert.deepEqual(cut.rows.at(-1), { type: "note", text: "… diff truncated: 10 more bytes not shown" });
  assert.deepEqual(parseUnifiedDiff(""), []);
});
