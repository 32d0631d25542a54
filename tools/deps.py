#!/usr/bin/env python3
"""Checks that the library's modules depend on each other in one direction (no cycles).

Usage: python3 tools/deps.py [--graph]

Reads every file under src/ (the CLI in src/bin/ is the top and is left out) and collects the
module paths it names (`crate::a::b`, `super::b`, `use crate::{a, b::c}`, in code and tests
alike). Two levels are checked: the crate's top-level modules (music, model, data, train,
generate, eval, ...) and, inside each folder module, its submodules (model's attention,
performer, kernels, ...). An edge to a folder's own mod.rs (its items) is not a submodule
edge. Every cycle is printed with the lines that make it, and the exit status is 1; with
--graph the edges are printed too.
"""

import re
import sys
from collections import defaultdict
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src"
PATH = re.compile(r"\b(crate|super(?:::super)*)::(\{[^}]*\}|\w+(?:::\w+)*(?:::\{[^}]*\})?)")


def module_path(file):
    """A file's module path: src/a/b/c.rs -> [a, b, c]; src/a/mod.rs -> [a]."""
    parts = list(file.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "mod":
        parts.pop()
    return parts


def targets(head, rest):
    """The module paths `head::rest` names: braces expand to one path per item."""
    rest = rest.replace(" ", "").replace("\n", "")
    if rest.startswith("{"):
        return [[head] + re.split(r"::", item) for item in split_items(rest[1:-1]) if item]
    if "::{" in rest:
        prefix, items = rest.split("::{", 1)
        return [[head] + prefix.split("::") + item.split("::") for item in split_items(items[:-1]) if item]
    return [[head] + rest.split("::")]


def split_items(text):
    return [t.strip() for t in text.split(",")]


def resolve(file_mod, path):
    """An absolute module path (from the crate root) for `crate::...` or `super::...`."""
    head, *rest = path
    if head == "crate":
        return rest
    ups = head.count("super")
    # A mod.rs file's module path is its folder, so super goes one up from there too.
    base = file_mod[: len(file_mod) - ups]
    return base + rest


def is_module(parts):
    """Whether `parts` names a module of the crate (a file or folder under src/)."""
    if not parts:
        return False
    p = SRC.joinpath(*parts)
    return p.with_suffix(".rs").is_file() or (p / "mod.rs").is_file()


def collect():
    top = defaultdict(list)  # (from, to) -> [where]
    sub = defaultdict(list)  # (folder, from, to) -> [where]
    for file in sorted(SRC.rglob("*.rs")):
        if file.relative_to(SRC).parts[0] == "bin" or file.name == "lib.rs":
            continue
        me = module_path(file)
        text = file.read_text()
        # Join `use` statements over lines so braces are read whole.
        for m in PATH.finditer(text):
            line = text.count("\n", 0, m.start()) + 1
            where = f"{file.relative_to(SRC.parent)}:{line}"
            for path in targets(m.group(1), m.group(2)):
                to = resolve(me, path)
                if not to or not is_module(to[:1]):
                    continue
                if to[0] != me[0]:
                    top[(me[0], to[0])].append(where)
                elif len(me) >= 2 and len(to) >= 2 and to[1] != me[1] and is_module(to[:2]):
                    sub[(me[0], me[1], to[1])].append(where)
    return top, sub


def cycles(edges):
    """Strongly connected components with more than one node (Tarjan)."""
    graph = defaultdict(set)
    for a, b in edges:
        graph[a].add(b)
        graph.setdefault(b, set())
    index, low, on, stack, out = {}, {}, set(), [], []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def main():
    top, sub = collect()
    show = "--graph" in sys.argv
    bad = 0
    levels = [("crate", {k: v for k, v in top.items()})]
    for folder in sorted({f for f, _, _ in sub}):
        levels.append((folder, {(a, b): w for (f, a, b), w in sub.items() if f == folder}))
    for name, edges in levels:
        if show:
            for (a, b), where in sorted(edges.items()):
                print(f"{name}: {a} -> {b}  ({len(where)}, e.g. {where[0]})")
        for comp in cycles(edges):
            bad += 1
            print(f"cycle in {name}: {' <-> '.join(comp)}")
            for (a, b), where in sorted(edges.items()):
                if a in comp and b in comp:
                    print(f"  {a} -> {b}: {', '.join(where[:3])}{' …' if len(where) > 3 else ''}")
    modules = len({m for e in top for m in e})
    if bad:
        print(f"{bad} dependency cycle(s)")
        return 1
    print(f"no dependency cycle: {modules} top-level modules, and the submodules of {len(levels) - 1} folders")
    return 0


if __name__ == "__main__":
    sys.exit(main())
