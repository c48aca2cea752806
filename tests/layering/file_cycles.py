#!/usr/bin/env python3
"""No circle between the files of a module (issue 36's acceptance): for every library and program
target of the project in a build tree, the graph "file A uses a symbol file B defines" (from the
object files, with nm) must have no cycle. Calls that go up a layer pass through callbacks handed
down at start (qdl__node_events, qdl__ep_hooks), which are not symbol references, so a cycle here
is a real circle between two files. Tests, benches and fuzz targets are not modules and are left
out. Exits 0 with none, 1 naming each circle, 77 when nm or the objects are missing."""
import collections
import glob
import os
import shutil
import subprocess
import sys

SKIP_DIRS = ("tests", "bench", "fuzz")


def objects(build):
    by_target = collections.defaultdict(list)
    for o in glob.glob(os.path.join(build, "**", "CMakeFiles", "*.dir", "**", "*.o"),
                       recursive=True):
        rel = os.path.relpath(o, build)
        if rel.split(os.sep)[0] in SKIP_DIRS:
            continue
        target = rel.split("CMakeFiles" + os.sep)[1].split(".dir")[0]
        by_target[target].append(o)
    return by_target


def symbols(o):
    out = subprocess.run(["nm", o], capture_output=True, text=True, check=True).stdout
    defined, used = set(), set()
    for line in out.splitlines():
        f = line.split()
        if len(f) == 3 and f[1] in "TDBR":
            defined.add(f[2])
        elif len(f) == 2 and f[0] == "U":
            used.add(f[1])
    return defined, used


def cycles(graph):
    index, low, stack, on, found = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
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
                found.append(comp)

    sys.setrecursionlimit(100000)
    for v in graph:
        if v not in index:
            visit(v)
    return found


def main():
    if len(sys.argv) != 2:
        print("usage: file_cycles.py BUILD_DIR", file=sys.stderr)
        return 2
    if not shutil.which("nm"):
        print("nm not found (binutils): skipped")
        return 77
    by_target = objects(sys.argv[1])
    if not by_target:
        print(f"no object files under {sys.argv[1]}: skipped")
        return 77
    bad = 0
    for target, objs in sorted(by_target.items()):
        owner, uses = {}, {}
        for o in objs:
            d, u = symbols(o)
            for s in d:
                owner[s] = o
            uses[o] = u
        graph = {o: {owner[s] for s in uses[o] if s in owner and owner[s] != o} for o in objs}
        for comp in cycles(graph):
            bad += 1
            names = sorted(os.path.basename(x)[:-2] for x in comp)
            edges = [f"{os.path.basename(a)[:-2]} -> {os.path.basename(b)[:-2]} ({s})"
                     for a in comp for s in sorted(uses[a])
                     if s in owner and (b := owner[s]) in comp and b != a]
            print(f"{target}: a circle between {', '.join(names)}:")
            for e in edges:
                print("  " + e)
    print(f"{len(by_target)} targets, {sum(map(len, by_target.values()))} files, {bad} circles")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
