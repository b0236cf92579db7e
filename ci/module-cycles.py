#!/usr/bin/env python3
"""Prints the strongly connected components (import circles) among the modules of one folder.

Usage: ci/module-cycles.py crates/bench/src/runner [crate::runner]
       ci/module-cycles.py crates/explain/src crate        (a whole crate)

Every path a file names (in `use` lines, braces expanded, and in code) that starts with
`crate::<prefix>::`, `super::` or `self::`, or with the name of a child module of the file's
module, is resolved to the module it reaches inside the folder; a file's `#[cfg(test)]` child
module (`x/tests.rs`) counts as part of `x`, and so does an inline `mod name { ... }` (its own
`super::` starts from inside it). A name a module brings in with `use` (`pub use ffi::abi;`,
`use store::take;`) is followed where a path reaches no module by itself (`crate::abi::event`
is `ffi::abi`). Comments, string and character literals are left out. Exits 1 when a circle of
two or more modules is left, 0 otherwise.
"""
import os
import re
import sys


def module_of(root, path):
    rel = os.path.relpath(path, root)[:-3].split(os.sep)
    if rel in (["lib"], ["main"]):
        return ()
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


def strip(text):
    """The code of a file without comments, string literals and character literals."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            depth, i = 1, i + 2
            while i < n and depth:
                if text.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif text.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    i += 1
            out.append(" ")
        elif c in "rb" and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")) and (
            m := re.match(r"b?r(#*)\"", text[i:])
        ):
            end = text.find('"' + m.group(1), i + m.end())
            i = n if end < 0 else end + 1 + len(m.group(1))
            out.append('""')
        elif c == '"':
            i += 1
            while i < n and text[i] != '"':
                i += 2 if text[i] == "\\" else 1
            i += 1
            out.append('""')
        elif c == "'" and (m := re.match(r"'(\\(x..|u\{[^}]*\}|.)|[^\\'])'", text[i:], re.S)):
            i += m.end()
            out.append("' '")
        else:
            out.append(c)
            i += 1
    return "".join(out)


def scopes(code):
    """(position, inline module path) at every change of inline `mod name { ... }` nesting."""
    marks, stack, depth, pending = [(0, ())], [], 0, None
    for m in re.finditer(r"\bmod\s+(\w+)\s*\{|[{}]", code):
        tok = m.group(0)
        if tok.startswith("mod"):
            depth += 1
            stack.append((m.group(1), depth))
        elif tok == "{":
            depth += 1
            continue
        else:
            depth -= 1
            if stack and stack[-1][1] == depth + 1:
                stack.pop()
            else:
                continue
        marks.append((m.end(), tuple(name for name, _ in stack)))
    return marks


def scope_at(marks, pos):
    inner = ()
    for at, path in marks:
        if at > pos:
            break
        inner = path
    return inner


def uses(code):
    """(position, path) of every `use` tree, braces expanded, `x as y` written `x@y`."""
    out = []
    for m in re.finditer(r"\buse\s+([^;]+);", code):
        tree = re.sub(r"\s+", "", re.sub(r"\s+as\s+", "@", m.group(1)))
        out += [(m.start(), p) for p in expand(tree)]
    return out


def main():
    root = sys.argv[1].rstrip("/")
    prefix = sys.argv[2] if len(sys.argv) > 2 else "crate::runner"
    files = [
        os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs if f.endswith(".rs")
    ]
    mods = {module_of(root, f) for f in files}
    graph = {m: set() for m in mods}
    # Per file: its module, the module its paths start from, its code and inline scopes.
    parsed = []
    for f in sorted(files):
        rel = os.path.relpath(f, root)[:-3].split(os.sep)
        # The module whose `super::` a file's paths start from (`x/tests.rs`: `x::tests`).
        if rel in (["lib"], ["main"]):
            here = ()
        else:
            here = tuple(rel[:-1]) if rel[-1] == "mod" else tuple(rel)
        code = strip(open(f).read())
        parsed.append((f, module_of(root, f), here, code, scopes(code)))

    def children(base):
        return {m[len(base)] for m in mods if len(m) > len(base) and m[: len(base)] == base}

    def start(path, here):
        """The module a path starts from and its remaining segments, or None (not ours)."""
        segs = path.split("::")
        if path.startswith(prefix + "::"):
            return (), segs[len(prefix.split("::")) :]
        if segs[0] in ("super", "self"):
            base = here
            while segs and segs[0] in ("super", "self"):
                if segs[0] == "super":
                    base = base[:-1]
                segs = segs[1:]
            return base, segs
        if segs[0] in children(here):
            return here, segs
        return None

    aliases = {}

    def resolve(base, segs, seen=()):
        for n in range(len(segs), 0, -1):
            cand = base + tuple(segs[:n])
            if cand in mods:
                return cand
        if segs and (base, segs[0]) in aliases and (base, segs[0]) not in seen:
            target, is_mod = aliases[(base, segs[0])]
            if is_mod:
                return resolve(target, segs[1:], seen + ((base, segs[0]),)) or target
            return target
        while base and base not in mods:
            base = base[:-1]
        return base if base in mods and base != () else None

    # The names each module brings in with `use`, twice over so that one alias may lean on another.
    for _ in range(2):
        for f, me, here, code, marks in parsed:
            for pos, p in uses(code):
                scope = here + scope_at(marks, pos)
                p, _, rename = p.partition("@")
                got = start(p, scope)
                if got is None or not got[1] or got[1][-1] in ("*", "self"):
                    continue
                base, segs = got
                name = rename or segs[-1]
                target = resolve(base, segs)
                if target is not None:
                    full = base + tuple(segs)
                    aliases[(scope, name)] = (target, full == target)
    for f, me, here, code, marks in parsed:
        paths = [(pos, p.partition("@")[0]) for pos, p in uses(code)]
        paths += [(m.start(), m.group(1)) for m in re.finditer(r"(?<![\w:])((?:crate|super|self)(?:::\w+)+)", code)]
        for child in children(here):
            paths += [
                (m.start(), m.group(1))
                for m in re.finditer(r"(?<![\w:])(" + child + r"(?:::\w+)+)", code)
            ]
        for pos, p in paths:
            scope = here + scope_at(marks, pos)
            got = start(p, scope)
            if got is None:
                continue
            target = resolve(*got)
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
