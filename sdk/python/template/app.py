"""wordstats: counts lines, words and bytes of the workspace files matching a pattern.

A typed airlock tool: componentize-py turns this module into a WebAssembly component of the
world `tool` (wit/tool.wit). The daemon calls `WitWorld.call` with the arguments as JSON text
(already validated against schema.json) and returns what it returns as the call's result;
raising `Err(ToolError(...))` makes the call a tool error. print() goes to the call's logs.
"""
import json
import os
from typing import Iterator

import wit_world
from wit_world.imports.types import Context, ToolError
from componentize_py_types import Err


class WitWorld(wit_world.WitWorld):
    def call(self, arguments: str, context: Context) -> str:
        if context.workspace is None:
            raise fail("this tool needs a workspace")
        try:
            result = run(json.loads(arguments), context.workspace)
        except ToolFailure as failure:
            raise fail(str(failure))
        return json.dumps(result)


class ToolFailure(Exception):
    """A call the tool ran but could not do: its message is the tool error's."""


def fail(message: str, retryable: bool = False) -> Err:
    return Err(ToolError(message=message, retryable=retryable))


def run(arguments: dict, workspace: str) -> dict:
    pattern = arguments["pattern"]
    options = arguments.get("options", {})
    max_files = options.get("max_files", 100)
    per_file = options.get("per_file", True)

    found = sorted(
        (path for path in walk(workspace) if matches(pattern, path)),
        key=lambda path: path.encode("utf-8", "surrogateescape"),
    )
    if not found:
        raise ToolFailure(f"no file matches {pattern}")

    files = []
    for path in found[:max_files]:
        with open(os.path.join(workspace, path), "rb") as file:
            files.append({"path": path, **count(file.read())})
    totals = {"files": len(files)}
    for key in ("lines", "words", "bytes"):
        totals[key] = sum(file[key] for file in files)
    result: dict = {"totals": totals, "truncated": len(found) > max_files}
    if per_file:
        result["files"] = files
    return result


def walk(root: str, prefix: str = "") -> Iterator[str]:
    """Regular files under root, relative and '/'-separated; names starting with '.' skipped."""
    with os.scandir(os.path.join(root, prefix) if prefix else root) as entries:
        for entry in entries:
            if entry.name.startswith("."):
                continue
            try:
                is_dir, is_file = entry.is_dir(), entry.is_file()
            except OSError:  # e.g. a symlink out of the sandbox: skipped
                continue
            if is_dir:
                yield from walk(root, prefix + entry.name + "/")
            elif is_file:
                yield prefix + entry.name


def matches(pattern: str, path: str) -> bool:
    """`*` matches any run of characters (`/` included), `?` exactly one, else itself."""
    # Iterative glob with backtracking to the last `*`: linear in practice, no recursion.
    p = s = 0
    star, mark = -1, 0
    while s < len(path):
        if p < len(pattern) and (pattern[p] == "?" or (pattern[p] != "*" and pattern[p] == path[s])):
            p, s = p + 1, s + 1
        elif p < len(pattern) and pattern[p] == "*":
            star, mark, p = p, s, p + 1
        elif star >= 0:
            mark += 1
            p, s = star + 1, mark
        else:
            return False
    while p < len(pattern) and pattern[p] == "*":
        p += 1
    return p == len(pattern)


def count(data: bytes) -> dict:
    """Lines, words and bytes of data, per SPEC.md (bytes, never decoded)."""
    # bytes.split() with no separator splits on runs of exactly the ASCII whitespace of
    # the spec (space, \t, \n, \r, \v, \f) and drops empty pieces: one piece per word.
    words = len(data.split())
    lines = data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)
    return {"lines": lines, "words": words, "bytes": len(data)}
