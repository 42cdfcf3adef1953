"""test_policy_reload.py: policies edited and reloaded on a running gateway with
SIGHUP, end to end: an edited rule takes effect without a rebuild or restart; a
broken set (syntax error, garbage return values) is refused with a log line
naming the file while the old set keeps serving; reloads under load fail no
request; a runaway hook (endless loop, memory hog) neither hangs nor crashes
the gateway: the built-in default decides and the log says so.

Every test runs on its own copy of the source tree's policies/. Reloads are
confirmed by polling the gateway log, never by sleeping."""

import os
import re
import subprocess
import threading

import harness
from harness import GatewayTest, account, is_error_event, main, wait_for

RESP_BODY = {"model": "gpt-test", "input": "hi"}
RESP_STREAM = dict(RESP_BODY, stream=True)
CHAT_BODY = {"model": "gpt-test", "messages": [{"role": "user", "content": "hi"}]}

RELOADED = "SIGHUP: policies reloaded from"
REFUSED = "SIGHUP: policy reload refused, the previous policy keeps serving:"
FALLBACK = "built-in default used"

# the documented example edit (docs/policies.md): hand 500s back to the client
CLASSIFY_FINAL_RE = re.compile(r'^  return (server_trouble\(ev\)|failover\("server", \d+\))  -- 5xx and anything unexpected\n',
                               re.M)
RETURN_500 = '  if s == 500 then return give_back("server") end   -- ours: hand 500s back\n'


def write_atomic(path, text):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def read(path):
    with open(path) as f:
        return f.read()


def served(r):
    return r.headers.get("x-switchyard-account")


class PolicyReloadTest(GatewayTest):

    def edit(self, pdir, name, fn):
        """Rewrites pdir/name with fn(old text); the edit must change something."""
        path = os.path.join(pdir, name)
        old = read(path)
        new = fn(old)
        self.assertNotEqual(new, old, f"the edit of {name} changed nothing (policies/ changed?)")
        write_atomic(path, new)
        return old

    def classify_edit(self, pdir, server_cooldown=None, return_500=False):
        def fn(src):
            m = CLASSIFY_FINAL_RE.search(src)
            self.assertTrue(m, "classify.lua's last rule is not where the test expects it")
            line = m.group(0)
            if server_cooldown is not None:
                # ours: no same-account retry, fail over with this cooldown
                line = f'  return failover("server", {server_cooldown})  -- 5xx and anything unexpected\n'
            if return_500:
                line = RETURN_500 + line
            return src[:m.start()] + line + src[m.end():]
        return self.edit(pdir, "classify.lua", fn)

    def sighup_and_wait(self, g, needle=RELOADED):
        """Sends SIGHUP and waits for one more `needle` line in the log; returns that line."""
        before = g.log_text().count(needle)
        g.sighup()
        wait_for(lambda: g.log_text().count(needle) > before,
                 what=f"the gateway log to say {needle!r} after SIGHUP")
        lines = [ln for ln in g.log_text().splitlines() if needle in ln]
        return lines[before]

    def prefer(self, g, name):
        g.cli("key", "prefer", "--db", g.db_path, "--name", "e2e", "--account", name)

    def failing_first_gateway(self, pdir, first="a"):
        """a answers 500, b is fine; the key prefers a, so every request tries a first."""
        g = self.gateway([account("a", self.mock.url("a", "status=500")),
                          account("b", self.mock.url("b"))], policies=pdir, start=False)
        self.prefer(g, first)
        return g.start()

    def assert500Returned(self, g, what):
        before = len(self.mock.requests())
        r = g.post("/v1/responses", RESP_BODY)
        direct = self.mock.call("x", "status=500", "responses", RESP_BODY)
        self.assertEqual(r.status, 500, f"{what}: {r}")
        self.assertEqual(r.json(), direct.json(), f"{what}: the upstream's 500 was altered")
        self.assertEqual([x["account"] for x in self.mock.requests()[before:] if x["account"] != "x"],
                         ["a"], f"{what}: the 500 was retried elsewhere")

    def assertFailsOver(self, g, what):
        before = len(self.mock.requests())
        r = g.post("/v1/responses", RESP_BODY)
        self.assertEqual(r.status, 200, f"{what}: {r}")
        self.assertEqual(served(r), "b", what)
        self.assertEqual(r.json()["output"][0]["content"][0]["text"], "hello from b")
        self.assertEqual([x["account"] for x in self.mock.requests()[before:]], ["a", "b"], what)

    # ------------------------------------------------------------ edit + SIGHUP

    def test_edited_rule_takes_effect_on_sighup(self):
        pdir = self.policy_copy()
        # a rests 0 s after a 5xx, so every request tries it again (it is the key's preferred one)
        self.classify_edit(pdir, server_cooldown=0)
        g = self.failing_first_gateway(pdir)
        # the listening line is written just after the port accepts: waited for, not read at once
        wait_for(lambda: f"policies {pdir}" in g.log_text() or None, what="the listening line naming the policies")
        self.assertFailsOver(g, "before the edit")
        self.assertFailsOver(g, "before the edit, again")
        self.classify_edit(pdir, return_500=True)
        line = self.sighup_and_wait(g)
        self.assertIn(pdir, line)
        self.assert500Returned(g, "after the edit and SIGHUP")
        self.assertTrue(g.running())
        # and back: the rule removed again, 500s fail over again
        self.edit(pdir, "classify.lua", lambda s: s.replace(RETURN_500, ""))
        self.sighup_and_wait(g)
        self.assertFailsOver(g, "after removing the rule")
        self.assertNotIn(REFUSED, g.log_text())
        self.assertNotIn(FALLBACK, g.log_text())

    # ------------------------------------------------------------ broken sets are refused

    BROKEN = [
        # file, broken content, text the refusal must contain besides the file name
        ("guard.lua", "return { version = 1, guard = function(acct)\n  return \"normal\"\n",
         "expected"),                                           # syntax error: 'end' expected
        ("order.lua", "return 42\n", None),                     # the file returns garbage
        ("classify.lua", "return { version = 1, classify = function(ev) return 42 end }\n",
         "self-check of classify failed"),                      # the hook returns garbage
        ("cooldown.lua", "return { version = 1, cooldown = function(st, class, now) return \"soon\" end }\n",
         "self-check of cooldown failed"),
        ("order.lua", "return { version = 2, order = function(c, ctx) return {} end }\n", None),
        ("guard.lua", "return { version = 1 }\n", None),        # no hook in the table
        ("order.lua", "local t = nil\nreturn { version = 1, order = function(c, ctx) return t.nope end }\n",
         "self-check of order failed"),                         # runtime error in the hook
    ]

    def test_broken_policy_is_refused_and_old_one_keeps_serving(self):
        pdir = self.policy_copy()
        self.classify_edit(pdir, return_500=True)   # observable: the default would fail over
        g = self.failing_first_gateway(pdir)
        self.assert500Returned(g, "the custom policy at start")
        reloads = g.log_text().count(RELOADED)
        for name, text, detail in self.BROKEN:
            with self.subTest(file=name, content=text.splitlines()[0]):
                path = os.path.join(pdir, name)
                good = read(path)
                write_atomic(path, text)
                try:
                    line = self.sighup_and_wait(g, REFUSED)
                finally:
                    write_atomic(path, good)
                self.assertIn(path, line, f"the refusal does not name the file: {line}")
                if detail:
                    self.assertIn(detail, line)
                self.assertTrue(g.running(), "the gateway died on a broken policy")
                self.assertEqual(g.log_text().count(RELOADED), reloads, "a broken set was swapped in")
                self.assert500Returned(g, f"after the refused {name}")
                self.assertEqual(g.get("/health", key=None).status, 200)
        # the repaired set loads again
        self.sighup_and_wait(g)
        self.assert500Returned(g, "after the repaired reload")
        self.assertNotIn(FALLBACK, g.log_text(), "a refused policy was ever called")

    def test_missing_policy_file_is_refused(self):
        pdir = self.policy_copy()
        self.classify_edit(pdir, return_500=True)
        g = self.failing_first_gateway(pdir)
        path = os.path.join(pdir, "cooldown.lua")
        good = read(path)
        os.unlink(path)
        try:
            line = self.sighup_and_wait(g, REFUSED)
        finally:
            write_atomic(path, good)
        self.assertIn("cooldown.lua", line)
        self.assert500Returned(g, "after the refused reload")

    # ------------------------------------------------------------ reload under load

    ORDER_FIXED = """-- test variant {n}: the 500ing account a first, then {first}, then the rest by id
local FIRST = "{first}"
return {{ version = 1, order = function(candidates, ctx)
  local a, first, rest = nil, nil, {{}}
  for _, c in ipairs(candidates) do
    if c.name == "a" then a = c.id
    elseif c.name == FIRST then first = c.id
    else rest[#rest + 1] = c.id end
  end
  table.sort(rest)
  if first then table.insert(rest, 1, first) end
  if a then table.insert(rest, 1, a) end
  return rest
end }}
"""

    def test_no_failed_request_during_reloads_under_load(self):
        pdir = self.policy_copy()
        self.classify_edit(pdir, server_cooldown=0)   # a keeps failing over, so classify runs every time
        order_path = os.path.join(pdir, "order.lua")
        classify_path = os.path.join(pdir, "classify.lua")
        classify_src = read(classify_path)
        write_atomic(order_path, self.ORDER_FIXED.format(n=0, first="b"))
        g = self.gateway([account("a", self.mock.url("a", "status=500")),
                          account("b", self.mock.url("b")), account("c", self.mock.url("c"))],
                         policies=pdir)
        self.assertEqual(served(g.post("/v1/responses", RESP_BODY)), "b")

        stop = threading.Event()
        results, lock = [], threading.Lock()

        def client(i):
            n = 0
            while not stop.is_set():
                kind = ("plain", "stream", "chat")[(i + n) % 3]
                n += 1
                try:
                    if kind == "plain":
                        r = g.post("/v1/responses", RESP_BODY)
                        ok = r.status == 200 and r.json()["output"][0]["content"][0]["text"] == \
                            f"hello from {served(r)}"
                        rec = (kind, r.status, served(r), ok, repr(r)[:200])
                    elif kind == "stream":
                        s = g.stream("/v1/responses", RESP_STREAM)
                        ok = (s.status == 200 and not s.truncated and s.types()[-1:] == ["response.completed"]
                              and not any(is_error_event(e) for e in s.events))
                        rec = (kind, s.status, s.headers.get("x-switchyard-account"), ok, repr(s)[:200])
                    else:
                        r = g.post("/v1/chat/completions", CHAT_BODY)
                        ok = r.status == 200
                        rec = (kind, r.status, served(r), ok, repr(r)[:200])
                except Exception as e:   # a dropped connection is a failed request too
                    rec = (kind, None, None, False, repr(e))
                with lock:
                    results.append(rec)

        threads = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(4)]
        for t in threads:
            t.start()
        try:
            for i in range(1, 21):
                first = "c" if i % 2 else "b"
                write_atomic(order_path, self.ORDER_FIXED.format(n=i, first=first))
                if i % 4 == 0:   # now and then a (harmless) classify edit too
                    write_atomic(classify_path, classify_src + f"-- edit {i}\n")
                self.sighup_and_wait(g)
            # the load stays up until enough requests ran to say anything, however slow the machine (a
            # fixed 3 s could end with fewer); most of them ran during the reloads
            wait_for(lambda: len(results) >= 20, what="20 requests under the reloads")
        finally:
            stop.set()
            for t in threads:
                t.join(harness.REQUEST_TIMEOUT)
        self.assertFalse(any(t.is_alive() for t in threads), "a client thread hung")
        bad = [r for r in results if not r[3]]
        self.assertEqual(bad, [], f"{len(bad)} of {len(results)} requests failed during reloads")
        self.assertGreaterEqual(len(results), 20, "too few requests ran to say anything")
        self.assertTrue({r[2] for r in results} <= {"b", "c"}, {r[2] for r in results})
        log = g.log_text()
        self.assertEqual(log.count(RELOADED), 20)
        self.assertNotIn(REFUSED, log)
        self.assertNotIn(FALLBACK, log, "a hook fell back to the built-in default during a reload")
        self.assertTrue(g.running())
        # the last set (i = 20: b first) is the one serving
        self.assertEqual(served(g.post("/v1/responses", RESP_BODY)), "b")

    # ------------------------------------------------------------ runaway hooks

    RUNAWAY = {
        # model: (Lua injected at the top of order(), reason the fallback names)
        "runaway-loop": ("while true do end", "timeout"),
        "runaway-pcall": ("while true do pcall(function() while true do end end) end", "timeout"),
        # pieces above the 32 MiB cap: filling it in small ones costs tens of ms of copies and
        # page faults, and the 50 ms time limit may then stop the hook first (reason "timeout")
        "runaway-mem": ('local t = {} while true do t[#t + 1] = string.rep("x", 1 << 25) .. #t end', "nomem"),
        "runaway-pattern": ("string.find(string.rep('a', 100000), '.-b')", "timeout"),
    }

    def runaway_order(self, pdir):
        def fn(src):
            head = "local function order(candidates, ctx)\n"
            self.assertIn(head, src)
            inject = "".join(f'  if ctx.model == "{m}" then {code} end\n'
                             for m, (code, _) in self.RUNAWAY.items())
            return src.replace(head, head + inject)
        self.edit(pdir, "order.lua", fn)

    def test_runaway_order_hook_falls_back_and_requests_succeed(self):
        pdir = self.policy_copy()
        self.runaway_order(pdir)   # only for these models: the load-time self-check passes
        g = self.gateway([account("a", self.mock.url("a")), account("b", self.mock.url("b"))],
                         policies=pdir)
        order_file = os.path.join(pdir, "order.lua")
        for n, (model, (_, reason)) in enumerate(self.RUNAWAY.items(), start=1):
            with self.subTest(model=model):
                r = g.post("/v1/responses", dict(RESP_BODY, model=model))
                self.assertEqual(r.status, 200, r)
                self.assertIn(served(r), ("a", "b"))
                s = g.stream("/v1/chat/completions", dict(CHAT_BODY, model=model, stream=True))
                self.assertEqual(s.status, 200, s)
                self.assertEqual(s.events[-1]["data"], "[DONE]")
                lines = [ln for ln in g.log_text().splitlines() if FALLBACK in ln]
                self.assertEqual(len(lines), 2 * n, lines)
                self.assertIn(f"order hook ({order_file}) failed", lines[-1])
                self.assertIn(reason, lines[-1])
                self.assertTrue(g.running())
                self.assertEqual(g.get("/health", key=None).status, 200)
        # an ordinary request runs the Lua hook again, without falling back
        before = g.log_text().count(FALLBACK)
        self.assertEqual(g.post("/v1/responses", RESP_BODY).status, 200)
        self.assertEqual(g.log_text().count(FALLBACK), before)

    def test_runaway_hooks_while_other_requests_flow(self):
        # a runaway hook costs its own request a bounded delay; concurrent ones still complete
        pdir = self.policy_copy()
        self.runaway_order(pdir)
        g = self.gateway([account("a", self.mock.url("a")), account("b", self.mock.url("b"))],
                         policies=pdir)
        results, lock = [], threading.Lock()

        def one(model):
            try:
                st = g.post("/v1/responses", dict(RESP_BODY, model=model)).status
            except Exception as e:
                st = repr(e)
            with lock:
                results.append((model, st))

        models = ["runaway-loop", "gpt-test", "runaway-pcall", "gpt-test", "runaway-mem", "gpt-test",
                  "runaway-pattern", "gpt-test"] * 2
        threads = [threading.Thread(target=one, args=(m,), daemon=True) for m in models]
        for t in threads:
            t.start()
        for t in threads:
            t.join(harness.REQUEST_TIMEOUT)
        self.assertEqual(sorted(results), sorted((m, 200) for m in models))
        self.assertTrue(g.running())

    def test_runaway_policy_is_refused_at_reload(self):
        # an endless loop in a hook (unconditional: the self-check runs into it) or at a file's top
        # level never passes the load: SIGHUP refuses it instead of hanging the loop
        pdir = self.policy_copy()
        self.classify_edit(pdir, return_500=True)
        g = self.failing_first_gateway(pdir)
        cases = [("classify.lua", "local function classify(ev)\n", "  while true do end\n"),
                 ("guard.lua", "local PRIMARY_RESERVE_AT", "while true do end\n")]
        for name, anchor, loop in cases:
            with self.subTest(file=name):
                path = os.path.join(pdir, name)
                good = self.edit(pdir, name, lambda s: s.replace(anchor, anchor + loop if anchor.endswith("\n")
                                                                 else loop + anchor))
                try:
                    line = self.sighup_and_wait(g, REFUSED)
                finally:
                    write_atomic(path, good)
                self.assertIn(path, line)
                # whichever bound trips first refuses it: the instruction count, or the CPU-time limit when
                # the build is slow (ASan) and the loop gets its 1 000 000 instructions in past 50 ms of CPU
                self.assertRegex(line, r"instruction limit|time limit")
                self.assertTrue(g.running())
                self.assert500Returned(g, f"after the refused runaway {name}")
        self.assertNotIn(FALLBACK, g.log_text())

    def test_broken_policy_at_startup_stops_the_gateway(self):
        pdir = self.policy_copy()
        path = os.path.join(pdir, "order.lua")
        write_atomic(path, "return { version = 1, order = function(c, ctx)\n")
        g = self.gateway([account("a", self.mock.url("a"))], policies=pdir, start=False)
        p = subprocess.run([harness.switchyard_bin(), "serve", "--db", g.db_path, "--listen",
                            f"{harness.HOST}:0", "--policies", pdir],
                           capture_output=True, text=True, timeout=60, env=g.env, cwd=g.dir,
                           stdin=subprocess.DEVNULL)
        self.assertNotEqual(p.returncode, 0, "the gateway started on a broken policy set")
        self.assertIn(path, p.stdout + p.stderr)
        self.assertEqual(self.mock.requests(), [])


if __name__ == "__main__":
    main()
