#!/usr/bin/env python3
"""Measure the import graph of the project's Python packages against their levels.

Reads every ``.py`` file under the package directories with :mod:`ast` (nothing is
imported or executed) and reports:

- imports between packages, per (importer, imported) pair;
- **upward** imports: a package importing a package on a higher level;
- **peer** imports: two packages on the same level importing each other's modules;
- **function-level** imports of project modules (inside a ``def``), split into those that
  cross packages and those within one package, and whether a comment on the line explains it;
- import **cycles** between modules (module-level imports only, as Python runs them) and
  between packages (all imports).

Levels follow the layout in the README ("Architecture"). A module whose dotted name starts
with one of ``--level PREFIX=N`` entries gets that level (longest prefix wins), so the same
script measures an older tree by mapping, e.g., ``affectsim_ros.core=1`` onto its old home.

Usage::

    python tools/import_graph.py                 # summary of this tree
    python tools/import_graph.py --list upward   # every upward import, file:line
    python tools/import_graph.py --dot graph.dot # package graph for Graphviz
    python tools/import_graph.py --check         # exit 1 if any rule is broken
    python tools/import_graph.py --root OLD --level affectsim_bridge=2 --level affectsim_nav=3 \
        --level affectsim_perception=3 --level affectsim_eval=4 --level affectsim_ros=5   # an older tree

The exit status of ``--check`` is non-zero when there is an upward or peer import, a
cycle, or a function-level import of a project module without a comment on its line.
"""
from __future__ import annotations

import argparse
import ast
import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent  # the tree measured (``--root`` measures another checkout)

#: The layered layout: package → level (README "Architecture").
DEFAULT_LEVELS: dict[str, int] = {
    "affectsim_core": 1,
    "affectsim_bridge": 2,
    "affectsim_nav": 3,
    "affectsim_perception": 3,
    "affectsim_eval": 4,
    "affectsim_ros": 5,
}
#: Generated message packages and third-party code are not levels.
EXTERNAL_PREFIXES = ("affectsim_interfaces",)


@dataclass(frozen=True)
class Import:
    """One ``import``/``from ... import`` statement naming a project module."""

    importer: str  # dotted module name of the file
    imported: str  # dotted module name imported (resolved for relative imports)
    path: Path
    line: int
    in_function: bool
    commented: bool  # a ``#`` comment on the import's line


def module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _resolve(node: ast.ImportFrom, importer: str, is_package: bool) -> str:
    if not node.level:
        return node.module or ""
    base = importer.split(".")
    if not is_package:
        base = base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def collect(packages: list[str]) -> list[Import]:
    """Every import of a project module in the given package directories."""
    found: list[Import] = []
    for pkg in packages:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            text = path.read_text(encoding="utf-8")
            lines = text.splitlines()
            tree = ast.parse(text, filename=str(path))
            importer = module_name(path)
            is_package = path.name == "__init__.py"

            def visit(node: ast.AST, in_function: bool) -> None:
                for child in ast.iter_child_nodes(node):
                    inside = in_function or isinstance(
                        child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
                    names: list[str] = []
                    if isinstance(child, ast.Import):
                        names = [a.name for a in child.names]
                    elif isinstance(child, ast.ImportFrom):
                        mod = _resolve(child, importer, is_package)
                        # ``from pkg import submodule`` imports the submodule
                        names = [mod]
                    for name in names:
                        if name.split(".")[0] in packages:
                            line = lines[child.lineno - 1]
                            found.append(Import(importer, name, path, child.lineno,
                                                in_function, "#" in line))
                    visit(child, inside)

            visit(tree, False)
    return found


def level_of(module: str, levels: dict[str, int]) -> int | None:
    best, best_len = None, -1
    for prefix, lvl in levels.items():
        if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best_len:
            best, best_len = lvl, len(prefix)
    return best


def group_of(module: str, levels: dict[str, int]) -> str:
    """The level prefix a module belongs to (its 'package' for this measurement)."""
    best = module.split(".")[0]
    best_len = -1
    for prefix in levels:
        if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best_len:
            best, best_len = prefix, len(prefix)
    return best


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one node (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    counter = 0
    nodes = set(edges) | {v for vs in edges.values() for v in vs}
    for start in sorted(nodes):
        if start in index:
            continue
        work = [(start, iter(sorted(edges.get(start, ()))))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, it = work[-1]
            advanced = False
            for nxt in it:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(edges.get(nxt, ())))))
                    advanced = True
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    comp.append(top)
                    if top == node:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def _module_of(imported: str, known: set[str]) -> str:
    """``pkg.mod.Name`` → the longest known module prefix (``from pkg.mod import Name``)."""
    parts = imported.split(".")
    for n in range(len(parts), 0, -1):
        cand = ".".join(parts[:n])
        if cand in known:
            return cand
    return imported


def analyse(levels: dict[str, int]) -> dict:
    packages = sorted({p.split(".")[0] for p in levels} | {
        d.name for d in ROOT.iterdir() if d.is_dir() and d.name.startswith("affectsim_")
        and (d / "__init__.py").exists()})
    packages = [p for p in packages if not p.startswith(EXTERNAL_PREFIXES)]
    imports = collect(packages)
    known = {module_name(p) for pkg in packages for p in (ROOT / pkg).rglob("*.py")}
    upward, peer, cross, fn_cross, fn_within, fn_uncommented = [], [], [], [], [], []
    pkg_edges: dict[str, set[str]] = defaultdict(set)
    mod_edges: dict[str, set[str]] = defaultdict(set)
    pair_counts: dict[tuple[str, str], int] = defaultdict(int)
    for imp in imports:
        target = _module_of(imp.imported, known)
        src_g, dst_g = group_of(imp.importer, levels), group_of(target, levels)
        if not imp.in_function:
            mod_edges[imp.importer].add(target)
        if imp.in_function:
            (fn_cross if src_g != dst_g else fn_within).append(imp)
            if not imp.commented:
                fn_uncommented.append(imp)
        if src_g == dst_g:
            continue
        cross.append(imp)
        pkg_edges[src_g].add(dst_g)
        pair_counts[(src_g, dst_g)] += 1
        ls, ld = level_of(imp.importer, levels), level_of(target, levels)
        if ls is None or ld is None:
            continue
        if ld > ls:
            upward.append(imp)
        elif ld == ls:
            peer.append(imp)
    # a module importing its own package's __init__ is not a cycle worth reporting
    for mod in list(mod_edges):
        mod_edges[mod] = {t for t in mod_edges[mod] if not mod.startswith(t + ".")}
    return {
        "imports": imports, "cross": cross, "upward": upward, "peer": peer,
        "fn_cross": fn_cross, "fn_within": fn_within, "fn_uncommented": fn_uncommented,
        "pair_counts": dict(pair_counts),
        "module_cycles": _cycles(mod_edges), "package_cycles": _cycles(pkg_edges),
        "levels": levels,
    }


def _where(imp: Import) -> str:
    return f"{imp.path.relative_to(ROOT)}:{imp.line}  {imp.importer} -> {imp.imported}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--level", action="append", default=[], metavar="PREFIX=N",
                    help="assign a level to a module prefix (repeatable; replaces defaults)")
    ap.add_argument("--list", choices=["upward", "peer", "function", "uncommented", "cross"])
    ap.add_argument("--dot", type=Path, help="write the package graph as Graphviz DOT")
    ap.add_argument("--check", action="store_true", help="exit 1 if a rule is broken")
    ap.add_argument("--root", type=Path, default=None, help="checkout to measure (default: this one)")
    args = ap.parse_args(argv)
    if args.root is not None:
        global ROOT
        ROOT = args.root.resolve()
    levels = dict(DEFAULT_LEVELS)
    if args.level:
        levels = {}
        for item in args.level:
            prefix, _, n = item.partition("=")
            if not prefix or not n.isdigit():
                ap.error(f"--level {item!r}: expected PREFIX=N, e.g. affectsim_core=1")
            levels[prefix] = int(n)
    r = analyse(levels)
    print(f"project imports: {len(r['imports'])}, between packages: {len(r['cross'])}")
    print(f"upward imports between packages: {len(r['upward'])}")
    print(f"peer imports between packages:   {len(r['peer'])}")
    print(f"function-level imports of project modules: cross-package {len(r['fn_cross'])}, "
          f"within a package {len(r['fn_within'])}, without a comment {len(r['fn_uncommented'])}")
    print(f"module import cycles (module level): {len(r['module_cycles'])}")
    for c in r["module_cycles"]:
        print("   ", " <-> ".join(c))
    print(f"package cycles (all imports): {len(r['package_cycles'])}")
    for c in r["package_cycles"]:
        print("   ", " <-> ".join(c))
    print("package edges (importer -> imported: count, level):")
    for (a, b), n in sorted(r["pair_counts"].items()):
        la, lb = level_of(a, levels), level_of(b, levels)
        mark = " UP" if la is not None and lb is not None and lb > la else (
            " PEER" if la is not None and la == lb else "")
        print(f"    {a} ({la}) -> {b} ({lb}): {n}{mark}")
    if args.list:
        key = {"upward": "upward", "peer": "peer", "cross": "cross",
               "function": "fn_cross", "uncommented": "fn_uncommented"}[args.list]
        print(f"\n{args.list}:")
        for imp in r[key]:
            print("   ", _where(imp))
    if args.dot:
        lines = ["digraph imports {", "  rankdir=BT;"]
        for (a, b), n in sorted(r["pair_counts"].items()):
            la, lb = level_of(a, levels), level_of(b, levels)
            colour = "red" if la is not None and lb is not None and lb >= la else "black"
            lines.append(f'  "{a}" -> "{b}" [label="{n}", color={colour}];')
        lines.append("}")
        args.dot.write_text("\n".join(lines) + "\n", encoding="utf-8")
    if args.check:
        broken = (r["upward"] or r["peer"] or r["module_cycles"] or r["package_cycles"]
                  or r["fn_uncommented"])
        return 1 if broken else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
