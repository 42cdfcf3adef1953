#!/usr/bin/env python3
"""peers_report.py: the tables of bench/peers.sh, from its results file.

usage: peers_report.py RESULTS NSTREAMS FIRST_BYTE_MS PEER...

RESULTS holds one line per measurement, "KIND key=value ...":
  LOAD mode= clients= target= requests= rps= p50_us= p99_us= errors= non2xx=
       proxy_cpu_s= upstream_cpu_s= other_cpu=      (one per wrk cell and round)
  SYSCALLS mode= target= requests= calls= each=name:count,...
  TTFB clients= target= n= p50_us= p99_us= errors=     (one per cell and round)
  HOLD target= n= open= idle_rss_kib= rss_kib= open_s=
  INSTR target= plain= stream=
Prints the summary (per request, plain / stream, with the ratios of
switchyard to each peer) and the detail tables. Figures only.
"""
import statistics
import sys

NAMES = {"direct": "direct", "switchyard": "switchyard", "nginx": "nginx", "portkey": "Portkey"}


def parse(path):
    out = []
    for line in open(path):
        kind, *kv = line.split()
        d = {"kind": kind}
        for x in kv:
            k, _, v = x.partition("=")
            try:
                d[k] = float(v)
            except ValueError:
                d[k] = v
        out.append(d)
    return out


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def main():
    rows = parse(sys.argv[1])
    nstreams, fb_ms, peers = sys.argv[2], sys.argv[3], sys.argv[4:]
    load, sysc, ttfb, hold, instr = {}, {}, {}, {}, {}
    for r in rows:
        if r["kind"] == "LOAD":
            load.setdefault((r["mode"], int(r["clients"]), r["target"]), []).append(r)
        elif r["kind"] == "SYSCALLS":
            sysc[(r["mode"], r["target"])] = r
        elif r["kind"] == "TTFB":
            ttfb.setdefault((int(r["clients"]), r["target"]), []).append(r)
        elif r["kind"] == "HOLD":
            hold[r["target"]] = r
        elif r["kind"] == "INSTR":
            instr[r["target"]] = r

    # A round in which wrk ran much longer than asked was stalled (the VM or
    # wrk paused: its latencies then include the pause); it is left out of
    # the medians, unless every round of the cell was.
    nominal = med([r["duration_us"] for rs in load.values() for r in rs])
    stalled = lambda r: r["duration_us"] > 1.25 * nominal

    def cell(mode, c, t):
        """medians over the (unstalled) rounds of one load cell"""
        rs = load.get((mode, c, t), [])
        if not rs:
            return None
        stalls = sum(1 for r in rs if stalled(r))
        if stalls < len(rs):
            rs = [r for r in rs if not stalled(r)]
        ok = [r for r in rs if r["requests"] > 0]
        return {
            "rounds": len(rs),
            "stalls": stalls,
            "rps": med([r["rps"] for r in rs]),
            "p50": med([r["p50_us"] / 1000 for r in ok]),
            "p99": med([r["p99_us"] / 1000 for r in ok]),
            "cpu": med([1e6 * r["proxy_cpu_s"] / r["requests"] for r in ok]),
            "up_cpu": med([1e6 * r["upstream_cpu_s"] / r["requests"] for r in ok]),
            "errors": sum(r["errors"] + r["non2xx"] for r in rs),
            "other": max(r["other_cpu"] for r in rs),
        }

    def added(mode, c, t, k):
        a, d = cell(mode, c, t), cell(mode, c, "direct")
        return a[k] - d[k] if a and d and a[k] is not None and d[k] is not None else None

    def sys_per_req(mode, t):
        s = sysc.get((mode, t))
        return s["calls"] / s["requests"] if s and s["requests"] else None

    def ttfb_cell(c, t):
        """medians over the rounds of one time-to-first-byte cell, in ms"""
        rs = ttfb.get((c, t), [])
        ok = [r for r in rs if r["n"]]
        if not ok:
            return None
        return {"p50": med([r["p50_us"] / 1000 for r in ok]), "p99": med([r["p99_us"] / 1000 for r in ok]),
                "n": sum(r["n"] for r in rs), "errors": sum(r.get("errors", 0) for r in rs), "rounds": len(rs)}

    def ttfb_added(c, t, k):
        a, d = ttfb_cell(c, t), ttfb_cell(c, "direct")
        return a[k] - d[k] if a and d else None

    def fmt(x, spec):
        return "-" if x is None else format(x, spec)

    def pair(f, spec):
        return lambda t: "%s / %s" % (fmt(f("plain", t), spec), fmt(f("stream", t), spec))

    def ratio(f, t, p):
        out = []
        for mode in ("plain", "stream"):
            a, b = f(mode, t), f(mode, p)
            out.append("%.2f" % (a / b) if a is not None and b is not None and a > 0 and b > 0 else "-")
        return " / ".join(out)

    summary = [
        ("CPU us of the proxy process, 64 clients", lambda m, t: (cell(m, 64, t) or {}).get("cpu"), ".1f"),
        ("CPU us of the proxy process, 1 client", lambda m, t: (cell(m, 1, t) or {}).get("cpu"), ".1f"),
        ("instructions (callgrind, 1 client)",
         lambda m, t: instr[t][m] if t in instr else None, ",.0f"),
        ("system calls (strace -c -f, 64 clients)", sys_per_req, ".1f"),
        ("added latency p50 ms, 1 client", lambda m, t: added(m, 1, t, "p50"), "+.3f"),
        ("added latency p99 ms, 1 client", lambda m, t: added(m, 1, t, "p99"), "+.3f"),
        ("added latency p50 ms, 64 clients", lambda m, t: added(m, 64, t, "p50"), "+.3f"),
        ("added latency p99 ms, 64 clients", lambda m, t: added(m, 64, t, "p99"), "+.3f"),
        ("req/s, 64 clients", lambda m, t: (cell(m, 64, t) or {}).get("rps"), ",.0f"),
    ]
    ttfb_rows = [
        ("added TTFB p50 / p99 ms, 1 client", 1),
        ("added TTFB p50 / p99 ms, 64 clients", 64),
    ]
    cols = peers
    w0 = 40
    wc = 22
    ratio_cols = [p for p in peers if p != "switchyard"] if "switchyard" in peers else []
    head = "%-*s" % (w0, "per request: plain / stream") + "".join("%*s" % (wc, NAMES[c]) for c in cols) + \
        "".join("%*s" % (wc, "switchyard/" + NAMES[p]) for p in ratio_cols)
    print("Summary (medians of the rounds; ratios are switchyard / peer)")
    print(head)
    for label, f, spec in summary:
        line = "%-*s" % (w0, label) + "".join("%*s" % (wc, pair(f, spec)(t)) for t in cols)
        line += "".join("%*s" % (wc, ratio(f, "switchyard", p)) for p in ratio_cols)
        print(line)
    for label, c in ttfb_rows:
        f = lambda m, t, c=c: ttfb_added(c, t, "p50" if m == "plain" else "p99")
        line = "%-*s" % (w0, label) + "".join("%*s" % (wc, pair(f, "+.2f")(t)) for t in cols)
        line += "".join("%*s" % (wc, ratio(f, "switchyard", p)) for p in ratio_cols)
        print(line)
    f = lambda m, t: (hold[t]["rss_kib"] / 1024 if m == "plain" else hold[t]["idle_rss_kib"] / 1024) \
        if t in hold and hold[t].get("open") == hold[t].get("n") else None
    line = "%-*s" % (w0, "RSS MiB, %s streams open / idle" % nstreams) + \
        "".join("%*s" % (wc, pair(f, ".1f")(t)) for t in cols)
    line += "".join("%*s" % (wc, ratio(f, "switchyard", p)) for p in ratio_cols)
    print(line)
    print("(TTFB: time to the first body byte of a streamed request, upstream's first byte after %s ms, "
          "minus the same direct; RSS: - when not all streams opened)" % fb_ms)
    print()

    print("Load cells (wrk; latency in ms; CPU in us per request; medians of the rounds)")
    fmt_l = "{:<7}{:>8}  {:<11}{:>10}{:>9}{:>9}{:>11}{:>11}{:>11}{:>14}{:>8}{:>8}{:>8}"
    print(fmt_l.format("mode", "clients", "target", "req/s", "p50", "p99", "added p50", "added p99",
                       "proxy CPU", "upstream CPU", "errors", "other", "stalls"))
    for mode in ("plain", "stream"):
        for c in (1, 64):
            for t in ["direct"] + peers:
                x = cell(mode, c, t)
                if not x:
                    continue
                print(fmt_l.format(mode, c, NAMES[t], fmt(x["rps"], ".0f"), fmt(x["p50"], ".3f"), fmt(x["p99"], ".3f"),
                                   "" if t == "direct" else fmt(added(mode, c, t, "p50"), "+.3f"),
                                   "" if t == "direct" else fmt(added(mode, c, t, "p99"), "+.3f"),
                                   "" if t == "direct" else fmt(x["cpu"], ".1f"), fmt(x["up_cpu"], ".1f"),
                                   "%d" % x["errors"], "%.2f" % x["other"], "%d" % x["stalls"]))
    print("(other: most cores busy, in any round, with processes other than proxy, upstream and wrk; "
          "well above 0 means the cell was disturbed. stalls: rounds in which wrk ran over 1.25x its "
          "duration, left out of the medians)")
    print()

    print("System calls per request (strace -c -f on the proxy, all threads, 64 clients, 3 s of wrk)")
    for mode in ("plain", "stream"):
        for t in peers:
            s = sysc.get((mode, t))
            if not s or not s["requests"]:
                continue
            each = sorted(((int(v), k) for k, v in (x.split(":") for x in str(s.get("each", "")).split(",") if ":" in x)),
                          reverse=True)
            top = ", ".join("%s %.2f" % (k, v / s["requests"]) for v, k in each[:7])
            print("  %-6s %-10s %5.1f  (%s)" % (mode, NAMES[t], s["calls"] / s["requests"], top))
    print()

    print("Time to first byte, upstream's first byte after %s ms (streamed; ms; medians of the rounds)" % fb_ms)
    fmt_t = "{:>8}  {:<11}{:>9}{:>9}{:>11}{:>11}{:>8}{:>8}"
    print(fmt_t.format("clients", "target", "p50", "p99", "added p50", "added p99", "n", "errors"))
    for c in (1, 64):
        for t in ["direct"] + peers:
            r = ttfb_cell(c, t)
            if not r:
                continue
            print(fmt_t.format(c, NAMES[t], fmt(r["p50"], ".2f"), fmt(r["p99"], ".2f"),
                               "" if t == "direct" else fmt(ttfb_added(c, t, "p50"), "+.2f"),
                               "" if t == "direct" else fmt(ttfb_added(c, t, "p99"), "+.2f"),
                               "%d" % r["n"], "%d" % r["errors"]))
    print()

    print("Memory with %s streams held open at once (fresh process each)" % nstreams)
    for t in peers:
        h = hold.get(t)
        if h:
            print("  %-10s idle %6.1f MiB   %d of %d open: %6.1f MiB   (opened in %ss)"
                  % (NAMES[t], h.get("idle_rss_kib", 0) / 1024, h.get("open", 0), h.get("n", 0),
                     h.get("rss_kib", 0) / 1024, h.get("open_s", "?")))


if __name__ == "__main__":
    main()
