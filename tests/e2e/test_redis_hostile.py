"""test_redis_hostile.py: a "Redis" that answers a command with an array
header announcing 2000000000 elements, then streams elements
(docs/scale-out.md, "Trust boundary"). hiredis 0.14 would allocate the
element table from the header (16 GB) and build every element that
follows; the gateway's reader refuses the header (core/redis_reply.c), the
link drops and is tried again with backoff, and the instance serves on its
own state. The fake speaks just enough RESP: AUTH, SELECT, HELLO, PING,
SUBSCRIBE; once it has answered anything else with the huge header, it
answers every later command (PINGs of the reconnects included) the same."""

import socket
import threading

import subprocess

from harness import GatewayTest, account, main, switchyard_bin, vm_kib, wait_for, HOST

HUGE = b"*2000000000\r\n"
STREAM = b":1\r\n" * (1 << 20)  # 4 MB of elements, sent 8 times after the header


class FakeRedis:
    def __init__(self):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((HOST, 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.poisoned = threading.Event()
        self.streamed = threading.Event()  # a poisoned answer is over: all of it sent, or cut by the gateway
        self.commands = []
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def url(self):
        return f"redis://{HOST}:{self.port}/0?pool=t"

    def _accept(self):
        while not self.closed:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    @staticmethod
    def _command(f):
        line = f.readline()
        if not line.startswith(b"*"):
            return None
        args = []
        for _ in range(int(line[1:])):
            n = int(f.readline()[1:])
            args.append(f.read(n + 2)[:n])
        return args

    def _poison(self, conn):
        self.poisoned.set()
        try:
            conn.sendall(HUGE)
            for _ in range(8):
                conn.sendall(STREAM)
        finally:
            self.streamed.set()

    def _serve(self, conn):
        f = conn.makefile("rb")
        try:
            while True:
                args = self._command(f)
                if not args:
                    return
                name = args[0].upper()
                self.commands.append(name)
                if name in (b"AUTH", b"SELECT", b"HELLO"):
                    conn.sendall(b"+OK\r\n")
                elif name == b"SUBSCRIBE":
                    ch = args[1]
                    conn.sendall(b"*3\r\n$9\r\nsubscribe\r\n$%d\r\n%s\r\n:1\r\n" % (len(ch), ch))
                elif name == b"PING" and not self.poisoned.is_set():
                    conn.sendall(b"+PONG\r\n")
                else:
                    self._poison(conn)
        except OSError:
            pass  # the gateway dropped the link
        finally:
            conn.close()

    def close(self):
        self.closed = True
        self.sock.close()


class RedisHostileTest(GatewayTest):

    def test_a_redis_off_this_machine_without_a_key_is_refused_unless_clear_text_is_accepted(self):
        # issue 33: logins are sealed by default when the address is not local (192.0.2.1: TEST-NET,
        # nothing answers there; a gateway that starts connects in the background and serves meanwhile)
        g = self.gateway([account("a", self.mock.url("a"))], start=False)
        env = dict(g.env)
        serve = [switchyard_bin(), "serve", "--db", g.db_path, "--listen", f"{HOST}:0", "--redis",
                 "redis://:hunter2secret@192.0.2.1:6379?pool=far"]
        p = subprocess.run(serve, env=env, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
        self.assertNotEqual(p.returncode, 0, p.stderr)
        self.assertIn("is not on this machine, and SWITCHYARD_REDIS_KEY is not set", p.stderr)
        self.assertIn("SWITCHYARD_REDIS_PLAINTEXT=1", p.stderr)
        self.assertNotIn("hunter2secret", p.stderr)  # the address is named without its password
        for extra in ({"SWITCHYARD_REDIS_KEY": "ab" * 32}, {"SWITCHYARD_REDIS_PLAINTEXT": "1"}):
            g.env = dict(env, **extra)
            g.serve_args = ["--redis", "redis://192.0.2.1:6379?pool=far"]
            g.start()  # starts: sealed, or clear text accepted
            self.assertEqual(g.post("/v1/chat/completions", {"model": "gpt-test", "messages": [
                {"role": "user", "content": "hi"}]}).status, 200)
            g.stop()

    def test_a_reply_announcing_two_billion_elements_is_refused_and_the_instance_degrades(self):
        fake = FakeRedis()
        self.addCleanup(fake.close)
        g = self.gateway([account("a", self.mock.url("a"))],
                         env={"SWITCHYARD_REDIS": fake.url(), "SWITCHYARD_USAGE_POLL_S": "0"})
        wait_for(lambda: "redis: connected to" in g.log_text(), what="the link up")
        hwm0 = vm_kib(g.proc.pid, "VmHWM")
        fake.poisoned.wait(10)
        self.assertTrue(fake.poisoned.is_set(), f"the gateway sent only {fake.commands}")
        h = wait_for(lambda: (lambda j: j if j["status"] == "degraded" else None)(g.get("/health").json()),
                     what="/health to say degraded")
        self.assertFalse(h["shared"]["reachable"], h)
        # the elements streamed meanwhile: the stream is over (all sent, or cut when the gateway dropped the
        # link) before the peak is read, awaited by the fake's own sign rather than a sleep
        self.assertTrue(fake.streamed.wait(20), "the poisoned answer never ended")
        self.assertIsNone(g.proc.poll(), "the gateway is alive")
        grew = vm_kib(g.proc.pid, "VmHWM") - hwm0
        self.assertLess(grew, 64 * 1024, f"peak RSS grew {grew} KiB")
        refusal = "a reply declaring 2000000000 array elements (at most 1048576) refused"
        self.assertIn(refusal, g.log_text())
        h = g.get("/health").json()
        self.assertTrue(any(refusal in x for x in h["reasons"]), h)
        # the link is tried again (and refused again) meanwhile; requests serve on local state
        pings = fake.commands.count(b"PING")
        failed = g.log_text().count("redis: attempt failed: ")
        for _ in range(3):
            r = g.post("/v1/chat/completions", {"model": "gpt-test", "messages": [{"role": "user", "content": "hi"}]},
                       key=g.key)
            self.assertEqual(r.status, 200, r)
        wait_for(lambda: fake.commands.count(b"PING") > pings, what="a reconnect attempt")
        # its refusal handled (the gateway says so at debug) before counting the loss lines: the PING was
        # only sent, the poisoned answer to it not yet read
        wait_for(lambda: g.log_text().count("redis: attempt failed: ") > failed, what="the reconnect attempt refused")
        self.assertIsNone(g.proc.poll(), "the gateway is alive")
        self.assertLess(vm_kib(g.proc.pid, "VmHWM") - hwm0, 64 * 1024)
        self.assertEqual(g.log_text().count(" lost: "), 1, "the loss is logged once")


if __name__ == "__main__":
    main()
