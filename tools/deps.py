#!/usr/bin/env python3
"""Checks that the library's modules, and the page's, depend on each other in one direction
(no cycles).

Usage: python3 tools/deps.py [--graph]

The page (www/*.js): every static `import`/`export ... from './x.js'` between its modules is an
edge, and a cycle among them fails as one in src/ does (a message the other way goes through
www/events.js).

Reads every file under src/ and collects the module paths it names (`crate::a::b`, `super::b`, `use crate::{a, b::c}`, in code and tests
alike). The CLI (src/bin/pianoformer/, a crate of its own: its `crate::` is main.rs) is checked
the same way, its folders named `bin::...`; what it uses of the library is above it. `model` must not import `music` (FORBIDDEN). Every level is checked: the crate's top-level modules (music, model, data, train,
generate, eval, ...) and, inside each folder module, its submodules (model's attention,
performer, kernels, ...; performer's state, step, plain, ...). An edge to a folder's own
items (its mod.rs or foo.rs) is not an edge between its submodules. Every cycle is printed with the lines that make it, and the exit status is 1; with
--graph the edges are printed too.
"""

import re
import sys
from collections import defaultdict
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src"
WWW = SRC.parent / "www"
JS_IMPORT = re.compile(r"""^\s*(?:import|export)\s[^'"]*?from\s+['"]\./([\w.-]+)\.js['"]""", re.M)
PATH = re.compile(r"\b(crate|super(?:::super)*)::(\{[^}]*\}|\w+(?:::\w+)*(?:::\{[^}]*\})?)")


BIN = SRC / "bin" / "pianoformer"


def module_path(file, root=SRC):
    """A file's module path: src/a/b/c.rs -> [a, b, c]; src/a/mod.rs -> [a]."""
    parts = list(file.relative_to(root).with_suffix("").parts)
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


def is_module(parts, root=SRC):
    """Whether `parts` names a module of the crate (a file or folder under `root`)."""
    if not parts:
        return False
    p = root.joinpath(*parts)
    return p.with_suffix(".rs").is_file() or (p / "mod.rs").is_file()


def collect(root=SRC, name="crate"):
    """Edges between sibling modules, per folder: {folder: {(from, to): [where]}}. `root`: the
    crate's folder (its lib.rs or main.rs declares the top modules), `name`: its folders' prefix."""
    edges = defaultdict(lambda: defaultdict(list))
    for file in sorted(root.rglob("*.rs")):
        if file.relative_to(root).parts[0] == "bin" or file.name in ("lib.rs", "main.rs"):
            continue
        me = module_path(file, root)
        text = file.read_text()
        for m in PATH.finditer(text):
            line = text.count("\n", 0, m.start()) + 1
            where = f"{file.relative_to(SRC.parent)}:{line}"
            for path in targets(m.group(1), m.group(2)):
                to = resolve(me, path)
                # The first level where the two paths part: an edge between siblings there,
                # when both sides are modules (not items of their common parent).
                k = 0
                while k < min(len(me), len(to)) and me[k] == to[k]:
                    k += 1
                if k < len(me) and k < len(to) and is_module(to[: k + 1], root):
                    folder = "::".join([name] + me[:k])
                    edges[folder][(me[k], to[k])].append(where)
    return edges


def collect_js():
    """Edges between the page's modules: {(from, to): [where]}."""
    edges = defaultdict(list)
    for file in sorted(WWW.glob("*.js")):
        text = file.read_text()
        for m in JS_IMPORT.finditer(text):
            line = text.count("\n", 0, m.start()) + 1
            edges[(file.stem, m.group(1))].append(f"{file.relative_to(SRC.parent)}:{line}")
    return edges


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


# Edges that must not exist even without a cycle: the model core knows nothing of music (its
# inputs are numbers; `data` turns music into them).
FORBIDDEN = {("crate", "model", "music"): "the model core imports nothing from music/ (data/ feeds it)"}


# The page's panels: the modules that own a part of the page. Their helpers (tune-files.js for
# tune.js, live.js for play-in.js), pure modules and services with no part of the page of their
# own (harmonizer.js, model-loader.js, sound.js, attention-view.js) are not panels. Panels
# import the page store, the Worker client, services and their own helpers, never each other
# (issue 37): a panel that needs another's work runs its command (www/commands.js) or changes
# the page store (www/page-store.js). PANEL_IMPORTS_LEFT lists exceptions still to remove
# (none); a new panel-to-panel import fails, and so does a listed one that is gone.
PANELS = {
    "attention-panel", "backend-card", "alternatives", "compare-panel", "generate", "lanes", "models",
    "piece-view", "play-in", "playback", "sharing", "tune",
}
PANEL_IMPORTS_LEFT = set()


def panel_problems(www_edges):
    """New panel-to-panel imports, and listed ones that are gone."""
    found = {(a, b) for (a, b) in www_edges if a in PANELS and b in PANELS}
    problems = []
    for a, b in sorted(found - PANEL_IMPORTS_LEFT):
        where = ", ".join(www_edges[(a, b)][:3])
        problems.append(f"panel {a} imports panel {b} ({where}): go through the store or a command")
    for a, b in sorted(PANEL_IMPORTS_LEFT - found):
        problems.append(f"panel {a} no longer imports {b}: take it off PANEL_IMPORTS_LEFT")
    return problems


def main():
    edges = collect()
    edges.update(collect(BIN, "bin"))
    edges["www"] = collect_js()
    show = "--graph" in sys.argv
    bad = 0
    for folder in sorted(edges):
        for (a, b), where in sorted(edges[folder].items()) if show else []:
            print(f"{folder}: {a} -> {b}  ({len(where)}, e.g. {where[0]})")
        for comp in cycles(edges[folder]):
            bad += 1
            print(f"cycle in {folder}: {' <-> '.join(comp)}")
            for (a, b), where in sorted(edges[folder].items()):
                if a in comp and b in comp:
                    print(f"  {a} -> {b}: {', '.join(where[:3])}{' …' if len(where) > 3 else ''}")
    for problem in panel_problems(edges["www"]):
        bad += 1
        print(problem)
    for (folder, a, b), why in FORBIDDEN.items():
        where = edges.get(folder, {}).get((a, b))
        if where:
            bad += 1
            print(f"forbidden import {a} -> {b} ({why}): {', '.join(where[:5])}")
    if bad:
        print(f"{bad} dependency problem(s)")
        return 1
    top = {m for e in edges.get("crate", {}) for m in e}
    cli = {m for e in edges.get("bin", {}) for m in e}
    page = {m for e in edges["www"] for m in e}
    print(
        f"no dependency cycle: {len(top)} top-level modules, the CLI's {len(cli)}, the submodules "
        f"of {len(edges) - 3} folders, and the page's {len(page)} modules (no panel imports another)"
    )
    print(sizes())
    return 0


def sizes():
    """The files past the size a file asks to be split at, for reports/code.md to cite."""
    def long(files, limit):
        over = sorted(((sum(1 for _ in f.open()), f) for f in files), reverse=True)
        over = [(n, f) for n, f in over if n > limit]
        names = ", ".join(f"{f.relative_to(SRC.parent)} ({n})" for n, f in over[:5])
        return f"{len(over)} over {limit} lines{': ' + names if over else ''}{' …' if len(over) > 5 else ''}"

    rust = [f for f in SRC.rglob("*.rs") if not f.name.endswith("tests.rs") and f.parent.name != "tests"]
    return f"sizes: library and CLI files (tests aside) {long(rust, 500)}; page modules {long(WWW.glob('*.js'), 500)}"


if __name__ == "__main__":
    sys.exit(main())
