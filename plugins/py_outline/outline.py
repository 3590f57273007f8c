#!/usr/bin/python3 -I
"""py_outline: the classes, functions and methods a Python file of the workspace defines.

A process tool under the JSON ABI (sdk/ABI.md): the arguments arrive on stdin as one JSON
object, one result document goes to stdout. The file is parsed with the ast module; nothing
in it is imported or executed.
"""

import ast
import json
import os
import sys

WORKSPACE = "/workspace"

# Sources larger than this are not hand-written modules worth outlining.
MAX_SOURCE_BYTES = 4 * 1024 * 1024


def result(document):
    json.dump(document, sys.stdout)
    sys.stdout.write("\n")


def error(message, retryable=False):
    result({"error": {"message": message, "retryable": retryable}})


def signature(node):
    """`name(args) -> returns` as written, without defaults' values spelled out twice."""
    text = f"{node.name}({ast.unparse(node.args)})"
    if node.returns is not None:
        text += f" -> {ast.unparse(node.returns)}"
    return text


def outline(body, prefix, inside_class):
    symbols = []
    for node in body:
        if isinstance(node, ast.ClassDef):
            bases = ", ".join(ast.unparse(base) for base in node.bases)
            symbols.append({
                "kind": "class",
                "name": prefix + node.name,
                "signature": f"{node.name}({bases})" if bases else node.name,
                "line": node.lineno,
                "end_line": node.end_lineno,
            })
            symbols.extend(outline(node.body, prefix + node.name + ".", True))
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            kind = "method" if inside_class else "function"
            if isinstance(node, ast.AsyncFunctionDef):
                kind = "async " + kind
            symbols.append({
                "kind": kind,
                "name": prefix + node.name,
                "signature": signature(node),
                "line": node.lineno,
                "end_line": node.end_lineno,
            })
            symbols.extend(outline(node.body, prefix + node.name + ".", False))
    return symbols


def main():
    try:
        arguments = json.load(sys.stdin)
    except ValueError as err:
        return error(f"the arguments are not JSON: {err}")
    path = arguments.get("path")
    if not isinstance(path, str) or not path:
        return error("`path` must name a Python file in the workspace")
    full = os.path.normpath(os.path.join(WORKSPACE, path))
    if full != WORKSPACE and not full.startswith(WORKSPACE + "/"):
        return error(f"{path} is outside the workspace")
    try:
        with open(full, "rb") as file:
            source = file.read(MAX_SOURCE_BYTES + 1)
    except OSError as err:
        return error(f"cannot read {path}: {err.strerror}")
    if len(source) > MAX_SOURCE_BYTES:
        return error(f"{path} is larger than {MAX_SOURCE_BYTES} bytes")
    try:
        tree = ast.parse(source, filename=path)
    except SyntaxError as err:
        return error(f"{path} is not valid Python: {err.msg} (line {err.lineno})")
    except ValueError as err:
        return error(f"{path} cannot be parsed: {err}")
    symbols = outline(tree.body, "", False)
    result({"ok": {"path": os.path.relpath(full, WORKSPACE), "symbols": symbols}})


if __name__ == "__main__":
    main()
