#!/usr/bin/env python3
"""The reference implementation of wordstats (SPEC.md); writes vectors.json from it.

Run from anywhere: `python3 sdk/wordstats/reference.py`. Every language's template must
produce exactly the `ok` values and `error` messages this writes.
"""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
WHITESPACE = b" \t\n\r\x0b\x0c"


def matches(pattern: str, path: str) -> bool:
    """`*` any run of characters (`/` included), `?` exactly one, else the character."""
    if not pattern:
        return not path
    if pattern[0] == "*":
        return any(matches(pattern[1:], path[i:]) for i in range(len(path) + 1))
    if not path:
        return False
    return (pattern[0] == "?" or pattern[0] == path[0]) and matches(pattern[1:], path[1:])


def walk(root: str, prefix: str = ""):
    """Regular files under root, relative, '/'-separated; names starting with '.' skipped."""
    for entry in sorted(os.scandir(os.path.join(root, prefix) if prefix else root), key=lambda e: e.name):
        if entry.name.startswith("."):
            continue
        rel = prefix + entry.name
        if entry.is_dir():
            yield from walk(root, rel + "/")
        elif entry.is_file():
            yield rel


def count(data: bytes) -> dict:
    words, in_word = 0, False
    for byte in data:
        if byte in WHITESPACE:
            in_word = False
        elif not in_word:
            in_word, words = True, words + 1
    lines = data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)
    return {"lines": lines, "words": words, "bytes": len(data)}


def wordstats(arguments: dict, workspace: str):
    pattern = arguments["pattern"]
    options = arguments.get("options", {})
    max_files = options.get("max_files", 100)
    per_file = options.get("per_file", True)
    found = sorted(path for path in walk(workspace) if matches(pattern, path))
    if not found:
        return {"error": f"no file matches {pattern}"}
    files = []
    for path in found[:max_files]:
        with open(os.path.join(workspace, path), "rb") as file:
            files.append({"path": path, **count(file.read())})
    totals = {"files": len(files)}
    for key in ("lines", "words", "bytes"):
        totals[key] = sum(file[key] for file in files)
    result = {"totals": totals, "truncated": len(found) > max_files}
    if per_file:
        result["files"] = files
    return {"ok": result}


CASES = [
    ("every text file, at any depth", {"pattern": "*.txt"}),
    ("one folder, totals only", {"pattern": "docs/*", "options": {"per_file": False}}),
    ("the first two files of all", {"pattern": "*", "options": {"max_files": 2}}),
    ("one character wildcard", {"pattern": "docs/?uide.md"}),
    ("nothing matches", {"pattern": "*.rs"}),
    ("hidden files are never counted", {"pattern": "*secret*"}),
]


def main() -> None:
    workspace = os.path.join(HERE, "workspace")
    vectors = []
    for name, arguments in CASES:
        vectors.append({"name": name, "arguments": arguments, **wordstats(arguments, workspace)})
    vectors.append({
        "name": "arguments that break the schema never reach the tool",
        "arguments": {"pattern": "*", "options": {"max_files": "2"}},
        "status": "INVALID_ARGUMENTS",
    })
    with open(os.path.join(HERE, "vectors.json"), "w") as out:
        json.dump({"tool": "wordstats", "workspace": "workspace", "vectors": vectors}, out, indent=2)
        out.write("\n")
    print(f"wrote {len(vectors)} vectors", file=sys.stderr)


if __name__ == "__main__":
    main()
