#!/usr/bin/env python3
"""CI check (.ci/run): the import graph of src/: which module uses which (`crate::a::b` paths and `super::`), at
the level of top-level modules and of run/'s files, then file by file; prints the cycles
(strongly connected components of more than one node)."""
import os, re, sys, collections
root = sys.argv[1] if len(sys.argv) > 1 else 'src'
def modname(path):
    rel = os.path.relpath(path, root)[:-3]
    parts = rel.split(os.sep)
    if parts[-1] == 'mod': parts = parts[:-1]
    if parts == ['lib'] or parts == ['main']: return 'crate'
    return '::'.join(parts)
def level(m, depth):
    # group modules: top-level, except run:: which is split one level deeper
    parts = m.split('::')
    if parts[0] == 'run' and len(parts) > 1:
        p = parts[:2]
        if p[1] in ('tests',): return None
        return '::'.join(p)
    return parts[0]
edges = collections.defaultdict(set)
for dp, dn, fn in os.walk(root):
    for f in fn:
        # test code: `tests.rs` files and the files of a `tests/` folder
        if not f.endswith('.rs') or f == 'tests.rs' or 'tests' in dp.split(os.sep): continue
        p = os.path.join(dp, f)
        m = modname(p)
        src = open(p).read()
        # drop test modules written inline
        i = src.find('#[cfg(test)]\nmod tests {')
        if i >= 0: src = src[:i]
        # comments name modules without using them
        src = '\n'.join(l for l in src.split('\n') if not l.lstrip().startswith('//'))
        a = level(m, 2)
        if a is None: continue
        for t in re.findall(r'crate::([a-z_]+(?:::[a-z_]+)?)', src):
            b = level(t, 2)
            if b and b != a and not b.startswith('crate'): edges[a].add(b)
        # super:: in run/ files refers to run::
        if m.startswith('run::'):
            for t in re.findall(r'super::([a-z_]+)', src):
                b = 'run::' + t
                if b != a: edges[a].add(b)
nodes = set(edges) | {b for v in edges.values() for b in v}
def components(edges):
    """Tarjan's strongly connected components of the graph `edges`."""
    nodes = set(edges) | {b for v in edges.values() for b in v}
    index = {}; low = {}; st = []; on = set(); sccs = []; c = [0]
    def sc(v):
        index[v] = low[v] = c[0]; c[0] += 1; st.append(v); on.add(v)
        for w in edges.get(v, ()):
            if w not in index: sc(w); low[v] = min(low[v], low[w])
            elif w in on: low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = st.pop(); on.discard(w); comp.append(w)
                if w == v: break
            sccs.append(comp)
    for v in sorted(nodes):
        if v not in index: sc(v)
    return nodes, sccs
sys.setrecursionlimit(10000)
nodes, sccs = components(edges)
cycles = [sorted(s) for s in sccs if len(s) > 1]
for s in cycles:
    print('cycle:', ', '.join(s))
    for a in s:
        print('   ', a, '->', ', '.join(sorted(b for b in edges[a] if b in s)))
print(len(cycles), 'cycle(s) among', len(nodes), 'modules')

# File by file: each .rs file a node; `crate::a::b::C` and `super::b::C` point at the deepest
# file the path names. A file's arrows to its own ancestors are left out (a child reads what
# its parent re-exports), as are a file's `mod` lines and `pub use` re-exports.
files = {}
for dp, dn, fn in os.walk(root):
    for f in fn:
        if f.endswith('.rs') and f != 'tests.rs' and 'tests' not in dp.split(os.sep):
            p = os.path.join(dp, f)
            files[tuple(p for p in modname(p).split('::') if p != 'crate')] = p
def deepest(parts):
    parts = tuple(parts)
    while parts and parts not in files: parts = parts[:-1]
    return parts
file_edges = collections.defaultdict(set)
declaration = re.compile(r'\s*(pub(\([a-z]+\))? )?mod |\s*pub(\([a-z]+\))? use ')
for m, p in files.items():
    src = open(p).read()
    i = src.find('#[cfg(test)]\nmod tests {')
    if i >= 0: src = src[:i]
    src = '\n'.join(l for l in src.split('\n')
                    if not l.lstrip().startswith('//') and not declaration.match(l))
    targets = [t.split('::') for t in re.findall(r'crate::((?:[a-z_][a-z0-9_]*::)*[a-z_][a-z0-9_]*)', src)]
    for ups, rest in re.findall(r'\b((?:super::)+)((?:[a-z_][a-z0-9_]*::)*[a-z_][a-z0-9_]*)', src):
        # `super::` of a/b.rs is a; of a/mod.rs (module a) it is a's parent: the same cut.
        targets.append(list(m[:len(m) - ups.count('super::')]) + rest.split('::'))
    for t in targets:
        b = deepest(t)
        if b and b != m[:len(b)]: file_edges[m].add(b)
_, file_sccs = components(file_edges)
file_cycles = [sorted('::'.join(x) for x in s) for s in file_sccs if len(s) > 1]
for s in file_cycles:
    print('file cycle:', ', '.join(s))
print(len(file_cycles), 'cycle(s) among', len(files), 'files')
# Any circle fails the check, inside run/ too (there each file is a node, and run/core/ is one:
# Core's own files), and between any two files.
if cycles or file_cycles:
    print('error: a circle between modules (an arrow back up)', file=sys.stderr)
    sys.exit(1)
