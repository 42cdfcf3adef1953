#!/usr/bin/env python3
"""tests/layers/check_layers.py: the house's rules, checked over the
#include lines of src/ (docs/architecture.md, "The house").

1. Each wing (a folder of src/) includes only itself and the wings listed
   before it in SY_WINGS of CMakeLists.txt; the top (src/ itself) may
   include every wing, and no wing includes the top. So no include goes up
   and no cycle between folders can come back.
2. No cycle between modules (a module is x.c with its x.h) inside a wing
   either: two modules that need each other are one concern or want a
   callback.
3. Every quoted include names a header by its path from src/ (so a file's
   wing shows at the include), and every file of src/ lies in a known wing.

Prints each breach and exits 1 if there is any; exits 0 with a summary.
Usage: check_layers.py [REPO_ROOT]"""
import os, re, shutil, subprocess, sys, tempfile

args = [a for a in sys.argv[1:] if a != '--self-test']
root = args[0] if args else os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..')
root = os.path.abspath(root)

if '--self-test' in sys.argv:
    # the check must fail on a copy of the tree with an upward include, and
    # on one with a cycle between two modules of one wing; pass on the tree
    me = os.path.abspath(__file__)
    def run(tree):
        return subprocess.run([sys.executable, me, tree], capture_output=True, text=True)
    def copy_with(edit):
        tmp = tempfile.mkdtemp(prefix='sy-layers-')
        shutil.copy(os.path.join(root, 'CMakeLists.txt'), tmp)
        shutil.copytree(os.path.join(root, 'src'), os.path.join(tmp, 'src'))
        path, text = edit
        with open(os.path.join(tmp, 'src', path), 'a') as f:
            f.write(text)
        return tmp
    cases = [
        ('an include of the top from base/', ('base/sbuf.c', '#include "serve.h"\n'), 'sits above it'),
        ('an include of http/ from route/', ('route/router.c', '#include "http/server.h"\n'), 'sits above it'),
        ('a cycle inside base/', ('base/sha256.c', '#include "base/json.h"\n'), 'module cycle'),
        ('an include without its wing', ('route/pool.c', '#include "sbuf.h"\n'), 'not a path under src/'),
    ]
    ok = run(root).returncode == 0
    if not ok:
        print('self-test: the tree itself fails the check')
    for name, edit, want in cases:
        tmp = copy_with(edit)
        try:
            if edit[0] == 'base/sha256.c':
                with open(os.path.join(tmp, 'src', 'base', 'json.c'), 'a') as f:
                    f.write('#include "base/sha256.h"\n')
            r = run(tmp)
        finally:
            shutil.rmtree(tmp)
        if r.returncode == 0 or want not in r.stdout:
            print(f'self-test: {name} was not caught ({r.returncode}): {r.stdout.strip()}')
            ok = False
        else:
            print(f'self-test: {name} caught')
    sys.exit(0 if ok else 1)

os.chdir(root)
m = re.search(r'^set\(SY_WINGS ([^)]*)\)', open('CMakeLists.txt').read(), re.M)
if not m:
    sys.exit('check_layers: no set(SY_WINGS ...) in CMakeLists.txt')
wings = m.group(1).split()
rank = {w: i for i, w in enumerate(wings)}
rank['.'] = len(wings)
inc_rx = re.compile(r'^\s*#\s*include\s*"([^"]+)"')
bad = []
deps = {}   # module path without extension -> set of modules it includes
files = []
for dp, dn, fn in os.walk('src'):
    dn.sort()
    for f in sorted(fn):
        if f.endswith(('.c', '.h')):
            files.append(os.path.join(dp, f))
for path in files:
    rel = os.path.relpath(path, 'src')
    wing = rel.split('/')[0] if '/' in rel else '.'
    if rel.count('/') > 1 or wing not in rank:
        bad.append(f'{path}: not in a wing listed in SY_WINGS (or the top)')
        continue
    mod = os.path.splitext(rel)[0]
    deps.setdefault(mod, set())
    for n, line in enumerate(open(path, encoding='utf-8', errors='replace'), 1):
        mo = inc_rx.match(line)
        if not mo:
            continue
        inc = mo.group(1)
        if not os.path.isfile(os.path.join('src', inc)):
            bad.append(f'{path}:{n}: includes "{inc}", which is not a path under src/')
            continue
        to = inc.split('/')[0] if '/' in inc else '.'
        if to not in rank:
            bad.append(f'{path}:{n}: includes "{inc}" from a folder that is not a wing')
        elif rank[to] > rank[wing]:
            bad.append(f'{path}:{n}: {wing}/ includes {inc}, which sits above it '
                       f'(order: {" ".join(wings)}, then the top)')
        target = os.path.splitext(inc)[0]
        if target != mod:
            deps[mod].add(target)

# module cycles: depth-first search, reporting each cycle once
state, stack, cycles = {}, [], set()
def visit(u):
    state[u] = 1
    stack.append(u)
    for v in sorted(deps.get(u, ())):
        if state.get(v) == 1:
            cyc = stack[stack.index(v):]
            k = cyc.index(min(cyc))
            cycles.add(tuple(cyc[k:] + cyc[:k]))
        elif v not in state:
            visit(v)
    stack.pop()
    state[u] = 2
sys.setrecursionlimit(10000)
# a header with no .c of its own (store_internal.h) declares what other
# modules implement: its includes are no dependency of behaviour
for u in list(deps):
    if not os.path.isfile(os.path.join('src', u + '.c')):
        deps[u] = set()
for u in sorted(deps):
    if u not in state:
        visit(u)
for c in sorted(cycles):
    bad.append('module cycle: ' + ' -> '.join(c + (c[0],)))

for b in bad:
    print(b)
if bad:
    sys.exit(1)
print(f'layers ok: {len(files)} files in {len(deps)} modules; wings {" ".join(wings)}, then the top; no cycles')
