#!/usr/bin/env python3
"""Measure the import graph of the project's Python packages against their levels.

Reads every ``.py`` file under the package directories with :mod:`ast` (nothing is
imported or executed) and reports:

- imports between packages, per (importer, imported) pair;
- **upward** imports: a package importing a package on a higher level;
- **peer** imports: two packages on the same level importing each other's modules;
- the same one level down, between the **sub-packages** of one package (``DEFAULT_SUBLEVELS``):
  upward and peer imports between sub-packages, and a sub-package importing **back up** into its
  package's root modules (those not in a levelled sub-package, ``__init__`` included);
- **function-level** imports of project modules (inside a ``def``), split into those that
  cross packages and those within one package, and whether a comment on the line explains it;
- import **cycles** between modules (module-level imports only, as Python runs them), between
  packages and between the sub-packages of one package (all imports).

Levels follow the layout in the README ("Architecture"). A module whose dotted name starts
with one of ``--level PREFIX=N`` entries gets that level (longest prefix wins), so the same
script measures an older tree by mapping, e.g., ``affectsim_ros.core=1`` onto its old home.

Sub-levels (``--sublevel PREFIX=N``, default :data:`DEFAULT_SUBLEVELS`) order the parts of one package:
a dotted prefix names a sub-package, and its level counts only among its siblings (the prefixes with
the same parent: the longest shorter prefix in the table, or the top-level package). A module in a
levelled sub-package may import its own sub-package and siblings on lower levels, never a sibling on
its own level (a peer) or a higher one; a module at the package's root (not in a levelled
sub-package, ``__init__`` included) may import every sub-package, and no levelled sub-package may
import the root ("back up"): the root is the top (a package's node lives there). A prefix nested
under another levels the parts of that sub-package the same way. All imports count, function-level
ones included. Imports between packages are judged by the package levels alone; ``--level`` without
``--sublevel`` checks no sub-levels (an older tree has other sub-packages).

Usage::

    python tools/import_graph.py                 # summary of this tree
    python tools/import_graph.py --list upward   # every upward import, file:line
    python tools/import_graph.py --dot graph.dot # package graph for Graphviz, sub-packages as rooms
    python tools/import_graph.py --check         # exit 1 if any rule is broken
    python tools/import_graph.py --list sub-upward   # every upward import between sub-packages
    python tools/import_graph.py --root OLD --level affectsim_bridge=2 --level affectsim_nav=3 \
        --level affectsim_perception=3 --level affectsim_eval=4 --level affectsim_ros=5   # an older tree

The exit status of ``--check`` is non-zero when there is an upward or peer import (between packages or
between the sub-packages of one), a cycle, a function-level import of a project module without a
comment on its line, or a sub-level prefix that names no package of the tree.
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
#: The parts of a package: sub-package → level among its siblings (README "Architecture"; each
#: package's ``__init__`` docstring says why). Modules at a package's root are above all of them.
DEFAULT_SUBLEVELS: dict[str, int] = {
    "affectsim_bridge.humans": 1,
    "affectsim_bridge.world": 1,
    "affectsim_bridge.backends": 2,
    "affectsim_bridge.content": 3,
    "affectsim_eval.scoring": 1,
    "affectsim_eval.episode": 2,
    "affectsim_eval.dataset": 3,
    "affectsim_eval.training": 4,
    "affectsim_eval.run": 4,
    "affectsim_eval.gym": 5,
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
    names: tuple[str, ...] = ()  # ``from imported import names``: a name may be a submodule


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
                    attrs: tuple[str, ...] = ()
                    if isinstance(child, ast.Import):
                        names = [a.name for a in child.names]
                    elif isinstance(child, ast.ImportFrom):
                        mod = _resolve(child, importer, is_package)
                        # ``from pkg import submodule`` imports the submodule (resolved in analyse)
                        names = [mod]
                        attrs = tuple(a.name for a in child.names if a.name != "*")
                    for name in names:
                        if name.split(".")[0] in packages:
                            line = lines[child.lineno - 1]
                            found.append(Import(importer, name, path, child.lineno,
                                                in_function, "#" in line, attrs))
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


def sublevel_chain(module: str, sublevels: dict[str, int]) -> list[str]:
    """The levelled sub-packages a module is in, outermost first."""
    return sorted((p for p in sublevels if module == p or module.startswith(p + ".")), key=len)


def sub_group_of(module: str, sublevels: dict[str, int]) -> str:
    """The innermost levelled sub-package of a module, or its top-level package (the root)."""
    chain = sublevel_chain(module, sublevels)
    return chain[-1] if chain else module.split(".")[0]


def sub_verdict(importer: str, target: str, sublevels: dict[str, int]) -> str | None:
    """``"upward"``, ``"peer"`` or ``"back-up"`` for an import within one package that breaks the
    sub-levels; None when it keeps them (same sub-package, a lower sibling, or from a root down)."""
    cs, ct = sublevel_chain(importer, sublevels), sublevel_chain(target, sublevels)
    i = 0
    while i < len(cs) and i < len(ct) and cs[i] == ct[i]:
        i += 1
    if i < len(cs) and i < len(ct):  # siblings under one parent
        ls, lt = sublevels[cs[i]], sublevels[ct[i]]
        return "upward" if lt > ls else "peer" if lt == ls else None
    if i < len(cs):  # the importer is in a levelled sub-package, the target at that parent's root
        return "back-up"
    return None  # same sub-package, or from a parent's root down into one of its sub-packages


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


def analyse(levels: dict[str, int], sublevels: dict[str, int] | None = None) -> dict:
    packages = sorted({p.split(".")[0] for p in levels} | {
        d.name for d in ROOT.iterdir() if d.is_dir() and d.name.startswith("affectsim_")
        and (d / "__init__.py").exists()})
    packages = [p for p in packages if not p.startswith(EXTERNAL_PREFIXES)]
    imports = collect(packages)
    known = {module_name(p) for pkg in packages for p in (ROOT / pkg).rglob("*.py")}
    sublevels = dict(DEFAULT_SUBLEVELS if sublevels is None else sublevels)
    unknown_sub = sorted(p for p in sublevels if not (ROOT / p.replace(".", "/") / "__init__.py").is_file())
    upward, peer, cross, fn_cross, fn_within, fn_uncommented = [], [], [], [], [], []
    sub_upward, sub_peer = [], []  # (Import, resolved target, "upward" | "back-up" | "peer")
    sub_edges: dict[str, set[str]] = defaultdict(set)
    sub_counts: dict[tuple[str, str], int] = defaultdict(int)
    pkg_edges: dict[str, set[str]] = defaultdict(set)
    mod_edges: dict[str, set[str]] = defaultdict(set)
    pair_counts: dict[tuple[str, str], int] = defaultdict(int)
    for imp in imports:
        target = _module_of(imp.imported, known)
        # ``from pkg import mod`` names the module ``pkg.mod``; other names are in ``pkg`` itself
        targets = sorted({_module_of(f"{imp.imported}.{n}", known) for n in imp.names} or {target})
        src_g, dst_g = group_of(imp.importer, levels), group_of(target, levels)
        if not imp.in_function:
            mod_edges[imp.importer].update(targets)
        if imp.importer.split(".")[0] == target.split(".")[0]:
            seen: set[str] = set()
            for t in targets:
                a, b = sub_group_of(imp.importer, sublevels), sub_group_of(t, sublevels)
                if a != b and b not in seen:
                    seen.add(b)
                    sub_edges[a].add(b)
                    sub_counts[(a, b)] += 1
                verdict = sub_verdict(imp.importer, t, sublevels)
                if verdict is not None:
                    (sub_peer if verdict == "peer" else sub_upward).append((imp, t, verdict))
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
        "sub_upward": sub_upward, "sub_peer": sub_peer, "sub_counts": dict(sub_counts),
        "sub_cycles": _cycles(sub_edges), "sublevels": sublevels, "unknown_sub": unknown_sub,
        "fn_cross": fn_cross, "fn_within": fn_within, "fn_uncommented": fn_uncommented,
        "pair_counts": dict(pair_counts),
        "module_cycles": _cycles(mod_edges), "package_cycles": _cycles(pkg_edges),
        "levels": levels,
    }


def _where(imp: Import, target: str | None = None, verdict: str | None = None) -> str:
    tail = f" ({target}: {verdict})" if verdict else ""
    return f"{imp.path.relative_to(ROOT)}:{imp.line}  {imp.importer} -> {imp.imported}{tail}"


def _sublevel_of(group: str, sublevels: dict[str, int]) -> str:
    return str(sublevels[group]) if group in sublevels else "root"


def dot(r: dict) -> str:
    """The import graph as Graphviz DOT: packages bottom-up by level, each package with levelled
    sub-packages drawn as a room (a cluster) holding its root and its sub-packages with the imports
    between them; a broken rule (upward, peer or back-up import) is a red arrow."""
    levels, sublevels = r["levels"], r["sublevels"]
    rooms = sorted({g.split(".")[0] for pair in r["sub_counts"] for g in pair})
    broken = {(sub_group_of(imp.importer, sublevels), sub_group_of(t, sublevels))
              for key in ("sub_upward", "sub_peer") for imp, t, _v in r[key]}
    lines = ["digraph imports {", "  rankdir=BT;", "  compound=true;", "  node [shape=box, fontsize=10];"]
    for pkg in rooms:
        subs = sorted({g for pair in r["sub_counts"] for g in pair if g.split(".")[0] == pkg} | {pkg})
        lines.append(f'  subgraph "cluster_{pkg}" {{')
        lines.append(f'    label="{pkg} (level {level_of(pkg, levels)})"; style=rounded;')
        for g in subs:
            label = "root (nodes)" if g == pkg else f"{g[len(pkg) + 1:]} ({_sublevel_of(g, sublevels)})"
            lines.append(f'    "{g}" [label="{label}"];')
        for (a, b), n in sorted(r["sub_counts"].items()):
            if a.split(".")[0] == pkg:
                lines.append(f'    "{a}" -> "{b}" [label="{n}", color={"red" if (a, b) in broken else "grey40"}];')
        lines.append("  }")
    for (a, b), n in sorted(r["pair_counts"].items()):
        la, lb = level_of(a, levels), level_of(b, levels)
        colour = "red" if la is not None and lb is not None and lb >= la else "black"
        ends = "".join(f', {k}="cluster_{p}"' for k, p in (("ltail", a), ("lhead", b)) if p in rooms)
        lines.append(f'  "{a}" -> "{b}" [label="{n}", color={colour}{ends}];')
    return "\n".join(lines + ["}"]) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--level", action="append", default=[], metavar="PREFIX=N",
                    help="assign a level to a module prefix (repeatable; replaces defaults)")
    ap.add_argument("--sublevel", action="append", default=[], metavar="PREFIX=N",
                    help="assign a level among its siblings to a sub-package (repeatable; replaces "
                         "defaults; with --level and no --sublevel, no sub-levels are checked)")
    ap.add_argument("--list", choices=["upward", "peer", "function", "uncommented", "cross",
                                       "sub-upward", "sub-peer"])
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
    sublevels = {} if args.level else dict(DEFAULT_SUBLEVELS)
    if args.sublevel:
        sublevels = {}
        for item in args.sublevel:
            prefix, _, n = item.partition("=")
            if "." not in prefix or not n.isdigit():
                ap.error(f"--sublevel {item!r}: expected PACKAGE.SUB=N, e.g. affectsim_eval.run=4")
            sublevels[prefix] = int(n)
    r = analyse(levels, sublevels)
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
    print(f"upward imports between sub-packages: {len(r['sub_upward'])}")
    print(f"peer imports between sub-packages:   {len(r['sub_peer'])}")
    print(f"sub-package cycles (all imports): {len(r['sub_cycles'])}")
    for c in r["sub_cycles"]:
        print("   ", " <-> ".join(c))
    for p in r["unknown_sub"]:
        print(f"sub-level prefix names no package of the tree: {p}")
    print("package edges (importer -> imported: count, level):")
    for (a, b), n in sorted(r["pair_counts"].items()):
        la, lb = level_of(a, levels), level_of(b, levels)
        mark = " UP" if la is not None and lb is not None and lb > la else (
            " PEER" if la is not None and la == lb else "")
        print(f"    {a} ({la}) -> {b} ({lb}): {n}{mark}")
    if r["sub_counts"]:
        print("sub-package edges within a package (importer -> imported: count, level among siblings):")
    sub_pair = {key: {(sub_group_of(imp.importer, r["sublevels"]), sub_group_of(t, r["sublevels"]))
                      for imp, t, _v in r[key]} for key in ("sub_upward", "sub_peer")}
    for (a, b), n in sorted(r["sub_counts"].items()):
        mark = " UP" if (a, b) in sub_pair["sub_upward"] else " PEER" if (a, b) in sub_pair["sub_peer"] else ""
        print(f"    {a} ({_sublevel_of(a, r['sublevels'])}) -> {b} ({_sublevel_of(b, r['sublevels'])}): {n}{mark}")
    if args.list:
        key = {"upward": "upward", "peer": "peer", "cross": "cross", "sub-upward": "sub_upward",
               "sub-peer": "sub_peer", "function": "fn_cross", "uncommented": "fn_uncommented"}[args.list]
        print(f"\n{args.list}:")
        for item in r[key]:
            print("   ", _where(*item) if isinstance(item, tuple) else _where(item))
    if args.dot:
        args.dot.write_text(dot(r), encoding="utf-8")
    if args.check:
        broken = (r["upward"] or r["peer"] or r["module_cycles"] or r["package_cycles"]
                  or r["fn_uncommented"] or r["sub_upward"] or r["sub_peer"] or r["sub_cycles"]
                  or r["unknown_sub"])
        return 1 if broken else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
