#!/usr/bin/env python3
"""Prints the strongly connected components (import circles) among the modules of one folder.

Usage: ci/module-cycles.py crates/bench/src/runner [crate::runner]

Every path a file names (in `use` lines, braces expanded, and in code) that starts with
`crate::<prefix>::`, `super::` or `self::` is resolved to the module it reaches inside the
folder; a file's `#[cfg(test)]` child module (`x/tests.rs`) counts as part of `x`. Exits 1 when
a circle of two or more modules is left, 0 otherwise.
"""
import os
import re
import sys


def module_of(root, path):
    rel = os.path.relpath(path, root)[:-3].split(os.sep)
    if rel[-1] == "mod":
        rel = rel[:-1]
    if rel and rel[-1] == "tests" and len(rel) > 1:
        rel = rel[:-1]
    return tuple(rel)


def expand(tree):
    """Expands `a::{b, c::{d}}` into ['a::b', 'a::c::d']."""
    tree = tree.strip()
    i = tree.find("{")
    if i < 0:
        return [tree]
    head, body = tree[:i], tree[i + 1 : tree.rfind("}")]
    parts, depth, cur = [], 0, ""
    for ch in body:
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
            continue
        depth += ch == "{"
        depth -= ch == "}"
        cur += ch
    parts.append(cur)
    return [head + p2 for p in parts if p.strip() for p2 in expand(p)]


def main():
    root = sys.argv[1].rstrip("/")
    prefix = sys.argv[2] if len(sys.argv) > 2 else "crate::runner"
    files = [
        os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs if f.endswith(".rs")
    ]
    mods = {module_of(root, f) for f in files}
    graph = {m: set() for m in mods}
    for f in files:
        me = module_of(root, f)
        # The module whose `super::` a file's paths start from.
        rel = os.path.relpath(f, root)[:-3].split(os.sep)
        here = tuple(rel[:-1]) if rel[-1] == "mod" else tuple(rel)
        text = re.sub(r"//[^\n]*", "", open(f).read())
        paths = []
        for u in re.findall(r"\buse\s+([^;]+);", text, re.S):
            paths += expand(re.sub(r"\s+", "", u))
        paths += re.findall(r"\b((?:crate|super|self)(?:::\w+)+)", text)
        for p in paths:
            segs = p.split("::")
            if p.startswith(prefix + "::"):
                base, segs = (), segs[len(prefix.split("::")) :]
            elif segs[0] in ("super", "self"):
                base = here
                while segs and segs[0] in ("super", "self"):
                    if segs[0] == "super":
                        base = base[:-1]
                    segs = segs[1:]
            else:
                continue
            target = None
            for n in range(len(segs), 0, -1):
                cand = base + tuple(segs[:n])
                if cand in mods:
                    target = cand
                    break
            if target is None and base in mods and base != ():
                target = base
            if target and target != me and target != () and not is_ancestor(target, me):
                graph[me].add(target)
    sccs = tarjan(graph)
    left = [sorted(s) for s in sccs if len(s) > 1]
    for s in sorted(left, key=len, reverse=True):
        print(f"circle of {len(s)}: " + ", ".join("::".join(m) for m in s))
        for m in s:
            outs = sorted("::".join(t) for t in graph[m] if t in set(s))
            print(f"  {'::'.join(m)} -> {', '.join(outs)}")
    print(f"{len(mods)} modules, {sum(len(v) for v in graph.values())} edges, {len(left)} circles")
    sys.exit(1 if left else 0)


def is_ancestor(a, b):
    return len(a) < len(b) and b[: len(a)] == a


def tarjan(graph):
    index, low, stack, on, out, n = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = n[0]
        n[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = set()
            while True:
                w = stack.pop()
                on.discard(w)
                comp.add(w)
                if w == v:
                    break
            out.append(comp)

    sys.setrecursionlimit(10000)
    for v in list(graph):
        if v not in index:
            visit(v)
    return out


if __name__ == "__main__":
    main()
