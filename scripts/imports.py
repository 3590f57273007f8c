#!/usr/bin/env python3
"""Checks the imports between the files of the workspace's Rust crates.

Two rules (issue 48's "no cycles, no upward imports"):

1. In every crate, the files' imports form no cycle: a file never uses an item of a file that
   (directly or through others) uses one of its own. Test files (`*_tests.rs`, `tests.rs`,
   `testing.rs`, `test_support.rs`) and `#[cfg(test)] mod tests` blocks are left out: tests may
   reach anywhere; so is the crate root (`lib.rs`, `main.rs`), the crate's face. A re-export
   (`pub use child::Item`) is a module's face, not a use by its code, and makes no edge. There is
   no list of cycles allowed to stay: a parent `mod.rs` that defines what its children use keeps
   those definitions in a file of their own (`changes/types.rs`, `engine/contract.rs`), which
   the children import and which imports none of them.
2. In the daemon, no import runs from a lower layer up to a higher one. The layers are the
   numbered list under "# Layers" in `daemon/src/lib.rs`'s module doc, top first; a module of
   level N may import modules of levels >= N. An upward import is allowed only when the
   importing file's `//!` doc explains it: it names the inversion (the word) and the imported
   module in backticks.

A file's imports are read from its `use` declarations and the paths in its code — `crate::`,
`super::`, `self::`, and a child module's name (`child::item`) — each resolved to the deepest
module file it names. This is a reader of Rust source by regular expressions, not a compiler:
a path built by a macro, or written after a `//` inside a string literal, is not seen.
Written here rather than taken from a crate because no maintained tool checks file-level
cycles of one crate (cargo-modules draws the graph, and needs nightly rustdoc).

Usage: scripts/imports.py [CRATE_SRC_DIR...]   (default: every crate of the workspace)
Exits 1 and names each cycle and each unexplained upward import.
"""

import collections
import os
import re
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CRATES = ["proto/src", "daemon/src", "client/src", "render/src", "eval/src", "cli/src",
          "mcp-bridge/src", "sdk/rust/src", "tests/src"]

TEST_FILES = re.compile(r"(^|/)(tests|testing|test_support)\.rs$|_tests\.rs$")
USE = re.compile(r"\buse\s+([^;]+);", re.S)
PATH = re.compile(r"\b(crate|super|self)((?:::[A-Za-z_][A-Za-z0-9_]*)+)")
CFG_TEST_MOD = re.compile(r"#\[cfg\(test\)\]\s*(?:#\[[^\]]*\]\s*)*(?:pub(?:\([^)]*\))?\s+)?mod\s+\w+\s*\{")


def module_path(rel):
    parts = rel[:-3].split("/")
    if parts[-1] in ("mod", "lib", "main"):
        parts = parts[:-1]
    return tuple(parts)


def expand(text):
    """`a::{b, c::{d, e}}` as its paths `a::b`, `a::c::d`, `a::c::e`."""
    text = re.sub(r"\s+", "", text)
    brace = text.find("{")
    if brace < 0:
        return [text]
    head, inner = text[:brace], text[brace + 1:text.rindex("}")]
    parts, depth, current = [], 0, ""
    for ch in inner:
        depth += ch == "{"
        depth -= ch == "}"
        if ch == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += ch
    parts.append(current)
    return [path for part in parts if part for path in expand(head + part)]


def graph(src):
    files = {}
    for directory, _, names in os.walk(src):
        for name in names:
            if name.endswith(".rs"):
                path = os.path.join(directory, name)
                files[os.path.relpath(path, src)] = path
    modules = {module_path(rel): rel for rel in files if not TEST_FILES.search(rel)}
    edges = collections.defaultdict(set)
    docs = {}

    def resolve(path):
        for n in range(len(path), 0, -1):
            if path[:n] in modules:
                return path[:n]
        return None

    for rel, path in files.items():
        if TEST_FILES.search(rel):
            continue
        with open(path, encoding="utf-8") as file:
            text = file.read()
        me = module_path(rel)
        docs[me] = "\n".join(line for line in text.splitlines() if line.startswith("//!"))
        cut = CFG_TEST_MOD.search(text)
        if cut:
            text = text[:cut.start()]
        text = re.sub(r"//[^\n]*", "", text)
        text = re.sub(r"pub\(in [^)]*\)", "pub", text)
        paths = []
        for use in USE.finditer(text):
            # A re-export (`pub use child::Item`) is the module's face, not a use of the item
            # by the module's own code: it makes no edge.
            if re.match(r"\s*pub\b", text[max(0, use.start() - 12):use.start()].split("\n")[-1]):
                continue
            body = use.group(1)
            paths += expand(body)
        paths += [m.group(1) + m.group(2) for m in PATH.finditer(text)]
        # `child::item` in code, for each child module of this one.
        code = USE.sub("", text)
        for child in {m[len(me)] for m in modules if len(m) == len(me) + 1 and m[:len(me)] == me}:
            if re.search(r"(?<![\w:])" + re.escape(child) + r"::", code):
                paths.append("self::" + child)
        for path in paths:
            path = re.sub(r"\bas\b.*$", "", path).rstrip(":")
            segments = [s for s in path.split("::") if s]
            if not segments:
                continue
            if segments[0] not in ("crate", "super", "self"):
                # `child::Item`, as the 2018 edition lets a module name its own children.
                if me + (segments[0],) not in modules:
                    continue
                segments = ["self"] + segments
            if segments[0] == "crate":
                target = tuple(segments[1:])
            else:
                current = list(me)
                i = 0
                while i < len(segments) and segments[i] in ("super", "self"):
                    if segments[i] == "super":
                        current = current[:-1]
                    i += 1
                target = tuple(current) + tuple(segments[i:])
            found = resolve(target)
            if found is not None and found != me and found != ():
                edges[me].add(found)
    return modules, edges, docs


def cycles(modules, edges):
    index, low, stack, on_stack, found = {}, {}, [], set(), []
    counter = [0]
    sys.setrecursionlimit(100000)

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(component)

    for v in sorted(modules):
        if v not in index:
            visit(v)
    return found


def layers(lib_rs):
    with open(lib_rs, encoding="utf-8") as file:
        doc = [line[3:].strip() for line in file if line.startswith("//!")]
    level, result, inside = 0, {}, False
    for line in doc:
        if line.startswith("#"):
            inside = line.lstrip("# ").lower().startswith("layers")
            continue
        if not inside or not line:
            continue
        if re.match(r"^\d+\.", line):
            level += 1
        elif level == 0:
            continue
        # An item's names come before its dash; a line without one continues the names.
        for name in re.findall(r"`(\w+)`", line.split("—")[0]):
            result[name] = level
    return result


def name(module):
    return "::".join(module) or "<crate root>"


def self_test():
    """The checker finds what it is for, on crates made for the purpose: a two-file cycle, a
    parent module and the child it calls by name using each other, and an upward import; and
    passes a crate whose parent only re-exports its child, or whose only cycle runs through a
    (`pub`) `#[cfg(test)]` module. A checker that stopped seeing imports would pass every
    crate; this fails instead."""
    import tempfile

    cases = {
        "cycle": ({"lib.rs": "mod a;\nmod b;\n", "a.rs": "use crate::b::B;\npub struct A;\n",
                   "b.rs": "use super::a::A;\npub struct B;\n"}, True),
        "parent_child": ({"lib.rs": "mod p;\n",
                          "p/mod.rs": "mod c;\npub struct P;\nfn f() { c::g(); }\n",
                          "p/c.rs": "use super::P;\npub fn g() {}\n"}, True),
        "reexport": ({"lib.rs": "mod p;\n", "p/mod.rs": "mod c;\npub use c::g;\npub struct P;\n",
                      "p/c.rs": "use super::P;\npub fn g() {}\n"}, False),
        "test_module": ({"lib.rs": "mod a;\nmod b;\n",
                         "a.rs": "pub struct A;\n#[cfg(test)]\npub mod tests {\n    use crate::b::B;\n}\n",
                         "b.rs": "use super::a::A;\npub struct B;\n"}, False),
    }
    failures = []
    for case, (files, has_cycle) in cases.items():
        with tempfile.TemporaryDirectory() as src:
            for path, text in files.items():
                os.makedirs(os.path.dirname(os.path.join(src, path)), exist_ok=True)
                with open(os.path.join(src, path), "w", encoding="utf-8") as file:
                    file.write("//! a module\n" + text)
            modules, edges, _ = graph(src)
            if bool(cycles(modules, edges)) != has_cycle:
                failures.append(f"self-test {case}: expected {'a' if has_cycle else 'no'} cycle")
    lib = "//! # Layers\n//!\n//! 1. `high` — above\n//! 2. `low` — below\n"
    with tempfile.TemporaryDirectory() as src:
        with open(os.path.join(src, "lib.rs"), "w", encoding="utf-8") as file:
            file.write(lib)
        level = layers(os.path.join(src, "lib.rs"))
        if level != {"high": 1, "low": 2}:
            failures.append(f"self-test layers: read {level} from a two-level list")
    return failures


def main():
    crates = sys.argv[1:] or CRATES
    problems = self_test()
    for crate in crates:
        src = os.path.join(REPO, crate)
        if not os.path.isdir(src):
            problems.append(f"{crate}: no such directory (update CRATES in this script)")
            continue
        modules, edges, docs = graph(src)
        for component in cycles(modules, edges):
            members = set(component)
            lines = [f"{crate}: files that import each other: "
                     + ", ".join(sorted(name(m) for m in component))]
            for a in sorted(component):
                for b in sorted(edges[a] & members):
                    lines.append(f"    {name(a)} uses {name(b)}")
            problems.append("\n".join(lines))
        lib = os.path.join(src, "lib.rs")
        if crate == "daemon/src":
            level = layers(lib)
            if not level:
                problems.append(f"{crate}/lib.rs: no numbered `# Layers` list in its module doc")
                continue
            for top in sorted({m[0] for m in modules if m}):
                if top not in level:
                    problems.append(f"{crate}: module `{top}` is in no layer of lib.rs's doc")
            for a, targets in sorted(edges.items()):
                for b in sorted(targets):
                    if not a or not b or a[0] == b[0]:
                        continue
                    la, lb = level.get(a[0]), level.get(b[0])
                    if la is None or lb is None or lb >= la:
                        continue
                    doc = docs.get(a, "")
                    explained = "inversion" in doc.lower() and f"`{b[0]}`" in doc
                    if not explained:
                        problems.append(
                            f"{crate}: {name(a)} (layer {la}) uses {name(b)} (layer {lb}, "
                            f"above it), with no inversion named in its module doc")
    for problem in problems:
        print(problem, file=sys.stderr)
    if problems:
        print(f"imports.py: {len(problems)} problem(s)", file=sys.stderr)
        return 1
    print(f"imports.py: no cycles, no upward imports ({len(crates)} crates)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
