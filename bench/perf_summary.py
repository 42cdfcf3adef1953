#!/usr/bin/env python3
"""perf_summary.py: condense `perf script -F tid,ip,sym,dso` output (call
graphs) of the gateway into the three questions bench/profile.sh asks:

  1. which system calls the samples are in (the __x64_sys_* frame), and
     which gateway function issued them;
  2. how much time is in the allocator (malloc/free family leaf frames), and
     which gateway function (or library entry point) called it;
  3. the gateway's own top-level activities (the outermost switchyard frame
     below the event loop, e.g. server_handle, upstream_on_sock_event).

usage: perf script -i perf.data -F tid,ip,sym,dso | perf_summary.py [--bin NAME]
Percentages are of all samples read.
"""
import argparse
import collections
import re
import sys

ALLOC = {"malloc", "_int_malloc", "_int_free", "free", "cfree@GLIBC_2.2.5", "__libc_calloc", "calloc",
         "realloc", "_int_realloc", "__libc_malloc", "__GI___libc_malloc", "__GI___libc_free",
         "malloc_consolidate", "unlink_chunk.constprop.0", "__libc_free", "__libc_realloc",
         "tcache_get", "tcache_put", "_int_free_merge_chunk", "_int_free_create_chunk",
         "__GI___libc_realloc", "sysmalloc"}
SKIP_OWNER = {"_start", "serve_main", "main", "__libc_start_call_main", "__libc_start_main_impl"}


def samples(f):
    cur = None
    for line in f:
        if not line.strip():
            if cur:
                yield cur
            cur = None
            continue
        if not line.startswith("\t"):
            cur = {"tid": line.split()[0], "frames": []}
            continue
        m = re.match(r"\s*([0-9a-f]+)\s+(.*?)\s+\((.*)\)\s*$", line)
        if m and cur is not None:
            sym = m.group(2).replace(" (inlined)", "")
            cur["frames"].append((sym, m.group(3)))
    if cur:
        yield cur


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="switchyard", help="basename of the gateway binary")
    ap.add_argument("--top", type=int, default=12)
    a = ap.parse_args()

    total = 0
    sysc = collections.Counter()
    sysc_owner = collections.Counter()
    alloc = 0
    alloc_owner = collections.Counter()
    top = collections.Counter()
    threads = collections.Counter()

    def ours(dso):
        return dso.rsplit("/", 1)[-1] == a.bin

    for s in samples(sys.stdin):
        fr = s["frames"]
        if not fr:
            continue
        total += 1
        # the innermost gateway function on the stack
        inner = next((sym for sym, dso in fr if ours(dso) and sym not in SKIP_OWNER and sym != "[unknown]"), None)
        # the outermost gateway function below serve_main / a thread's start
        outer = None
        for sym, dso in reversed(fr):
            if ours(dso) and sym not in SKIP_OWNER and sym != "[unknown]":
                outer = sym
                break
        threads[outer if outer in ("trace_main", "writer_main") else "event loop (main thread)"] += 1
        top[outer or "(libevent, no gateway frame)"] += 1
        sc = next((sym for sym, _ in fr if sym.startswith("__x64_sys_")), None)
        if sc:
            name = sc[len("__x64_sys_"):]
            sysc[name] += 1
            sysc_owner[(name, inner or "(libevent internals)")] += 1
        leaf = fr[0][0]
        if leaf in ALLOC:
            alloc += 1
            # first named frame outside libc: ours, or a library entry point
            owner = next((f"{sym} [{dso.rsplit('/', 1)[-1]}]" for sym, dso in fr
                          if "libc.so" not in dso and sym != "[unknown]" and sym not in ALLOC), "?")
            if inner and not owner.endswith(f"[{a.bin}]"):
                owner = f"{owner} <- {inner}"
            alloc_owner[owner] += 1

    if not total:
        print("  (no samples)")
        return
    pct = lambda n: 100.0 * n / total
    print(f"  samples: {total}")
    print("  by thread:  " + ", ".join(f"{k} {pct(v):.1f}%" for k, v in threads.most_common()))
    print()
    print(f"  In system calls: {pct(sum(sysc.values())):.1f}% of samples")
    for name, n in sysc.most_common(a.top):
        owners = [(o, c) for (sn, o), c in sysc_owner.most_common() if sn == name][:3]
        print(f"    {name:<14} {pct(n):5.1f}%   from " + ", ".join(f"{o} {pct(c):.1f}%" for o, c in owners))
    print()
    print(f"  In the allocator (malloc/free family): {pct(alloc):.1f}% of samples; callers:")
    for o, n in alloc_owner.most_common(a.top):
        print(f"    {pct(n):5.1f}%  {o}")
    print()
    print("  Gateway activities (outermost gateway frame, inclusive):")
    for o, n in top.most_common(a.top):
        print(f"    {pct(n):5.1f}%  {o}")


if __name__ == "__main__":
    main()
