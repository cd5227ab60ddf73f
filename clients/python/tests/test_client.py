"""The client against a real sluice serve: the shared script, and a
service that is down, slow, answers garbage or restarts."""

import os
import sys
import threading
import time
import unittest

from sluice import Client, InvalidRequest, Unavailable, normalize_key

from .support import MisbehavingServer, Server, call_key, http_answer, load_script


def play(client, call, state):
    """Makes one call of the script; returns its answer as the script's
    wants are written."""
    op, rule, key = call["op"], call.get("rule", ""), call_key(call)
    cost = call.get("cost", 1)

    def decided(d, outcome=False):
        out = {"allowed": d.allowed, "remaining": d.remaining, "limit": d.limit, "waits": d.retry_after > 0}
        if outcome:
            out["duplicate"] = d.duplicate
        return out

    try:
        if op == "check":
            return decided(client.check(rule, key, cost))
        if op == "peek":
            return decided(client.peek(rule, key))
        if op == "insert":
            return decided(client.insert(rule, key, cost))
        if op == "reset":
            client.reset(rule, key)
            return {}
        if op in ("reserve", "commit", "refund"):
            return decided(getattr(client, op)(rule, key, call["id"], cost), outcome=True)
        if op == "report":
            return decided(client.report(rule, key, call["id"], call["outcome"], cost), outcome=True)
        if op == "login_begin":
            a = client.login_begin(call["login"], call["user"], call["address"])
            state["attempt"] = a
            return {"allowed": a.allowed, "captcha": a.captcha, "known_good": a.known_good,
                    "delays": a.delay > 0, "waits": a.retry_after > 0}
        if op in ("login_succeed", "login_fail"):
            s = client.login_settle(state["attempt"], success=op == "login_succeed")
            return {"duplicate": s.duplicate, "banned": s.banned}
        if op == "acquire":
            lease = client.acquire(rule, key)
            if lease.ok:
                state["lease"] = lease
            return {"ok": lease.ok, "in_use": lease.in_use, "limit": lease.limit}
        if op == "release":
            return {"ok": client.release(state["lease"])}
    except InvalidRequest as e:
        name = rule or call.get("login", "")
        if name not in str(e):
            raise AssertionError(f"{call}: the error does not name the rule: {e}")
        return {"error": "invalid"}
    raise AssertionError(f"unknown op {op!r}")


class ScriptTest(unittest.TestCase):
    """The script of clients/testdata gets the Go client's answers."""

    def test_script(self):
        server = Server()
        self.addCleanup(server.stop)
        client = Client(server.url, timeout=5)
        self.addCleanup(client.close)
        state = {}
        for i, call in enumerate(load_script()["calls"]):
            with self.subTest(i=i, call=call):
                self.assertEqual(play(client, call, state), call["want"])
        # Every call went over one kept-alive connection.
        self.assertEqual(len(client._idle), 1)


class FailureTest(unittest.TestCase):
    """A service that does not decide gets the failure policy's answer
    within the timeout; a refused request, a clear error."""

    def assertBounded(self, started, timeout):
        # A call its timeout failed to end would hang on these servers,
        # which never answer or never finish; a bound of seconds tells that
        # from a loaded machine, which may take seconds longer than timeout.
        elapsed = time.monotonic() - started
        self.assertLess(elapsed, timeout + 10.0, f"took {elapsed:.2f}s with a timeout of {timeout}s")

    def test_down(self):
        # A port nothing listens on: connection refused.
        server = MisbehavingServer(lambda data: None)
        url = server.url
        server.close()
        for failure, allowed in (("open", True), ("closed", False)):
            c = Client(url, timeout=0.3, failure=failure)
            self.addCleanup(c.close)
            started = time.monotonic()
            d = c.check("login", "203.0.113.7")
            self.assertBounded(started, 0.3)
            self.assertEqual(d.allowed, allowed)
            self.assertIsInstance(d.error, Unavailable)
            self.assertEqual(d.retry_after, 0 if allowed else 1.0)
            self.assertEqual(c.login_begin("web", "u", "203.0.113.7").allowed, allowed)
            self.assertEqual(c.acquire("reports", "t").ok, allowed)
            with self.assertRaises(Unavailable):
                c.commit("login", "k", "id-1")

    def test_slow(self):
        # Accepts, reads, never answers: the call ends at the timeout.
        server = MisbehavingServer(lambda data: None)
        self.addCleanup(server.close)
        c = Client(server.url, timeout=0.3, failure="closed")
        self.addCleanup(c.close)
        started = time.monotonic()
        d = c.check("login", "k")
        self.assertBounded(started, 0.3)
        self.assertFalse(d.allowed)
        self.assertIn("no answer within 0.3s", str(d.error))

    def test_garbage(self):
        answers = [
            http_answer("200 OK", "<html>a proxy's page</html>", "text/html"),
            http_answer("200 OK", '{"rule":"login"}'),
            http_answer("200 OK", "[1,2,3]"),
            http_answer("200 OK", '{"allowed":"yes"}'),
            http_answer("502 Bad Gateway", "upstream down", "text/plain"),
            http_answer("503 Service Unavailable", '{"detail":"store failed","error":"store failed"}'),
            b"SSH-2.0-OpenSSH_9.2\r\n",
            b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{\"allowed\":",
        ]
        for answer in answers:
            with self.subTest(answer=answer[:40]):
                server = MisbehavingServer(lambda data, a=answer: a)
                try:
                    for failure in ("open", "closed"):
                        c = Client(server.url, timeout=0.5, failure=failure)
                        started = time.monotonic()
                        d = c.check("login", "k")
                        self.assertBounded(started, 0.5)
                        self.assertIsInstance(d.error, Unavailable, d)
                        self.assertEqual(d.allowed, failure == "open")
                        c.close()
                finally:
                    server.close()

    def test_misconfigured_rule(self):
        server = Server()
        self.addCleanup(server.stop)
        c = Client(server.url, timeout=5, failure="open")
        self.addCleanup(c.close)
        for call in (lambda: c.check("logn", "k"), lambda: c.reserve("logn", "k", "id-1"),
                     lambda: c.insert("logn", "k", 1), lambda: c.login_begin("wbe", "u", "203.0.113.7"),
                     lambda: c.acquire("repots", "k")):
            with self.assertRaises(InvalidRequest) as cm:
                call()
            self.assertRegex(str(cm.exception), r"'(logn|wbe|repots)'.*unknown")
            self.assertEqual(cm.exception.status, 400)

    def test_keys_of_any_bytes(self):
        server = Server()
        self.addCleanup(server.stop)
        c = Client(server.url, timeout=5)
        self.addCleanup(c.close)
        for key in (b"\x00\xff", "\udcff", "\ud800x", "ключ", "k" * 50000, b"\xc3"):
            d = c.check("api", key)
            self.assertTrue(d.allowed, key[:10])
        # Go's encoding/json turns each invalid byte into U+FFFD; so do we.
        self.assertEqual(normalize_key(b"a\xe2\x9cb\xff"), "a\ufffd\ufffdb\ufffd")
        self.assertEqual(normalize_key("\udcff"), "\ufffd")
        # A key too long for the service's body limit is refused, clearly.
        with self.assertRaises(InvalidRequest) as cm:
            c.check("api", "k" * 70000)
        self.assertEqual(cm.exception.status, 413)

    def test_headers_read_late(self):
        # A Decision's RateLimit fields, found when first asked for, are
        # its own answer's, read after the connection carried other calls.
        server = Server()
        self.addCleanup(server.stop)
        c = Client(server.url, timeout=5)
        self.addCleanup(c.close)
        keys = ("k", b"\x00\xff", "ключ", "\r\n\r\n")
        decisions = [(c.check("login", key), c.check("login", key)) for key in keys]
        self.assertEqual(len(c._idle), 1)
        for first, second in decisions:
            self.assertRegex(dict(first.headers)["RateLimit"], r'^"login";r=2;t=\d+$')
            self.assertRegex(dict(second.headers)["RateLimit"], r'^"login";r=1;t=\d+$')
            self.assertEqual(dict(second.headers)["RateLimit-Policy"], '"login";q=3;w=3600')

    def test_restart(self):
        # The service restarts: the kept-alive connection is dead, the
        # next call takes a new one and gets an answer.
        server = Server()
        self.addCleanup(server.stop)
        c = Client(server.url, timeout=5)
        self.addCleanup(c.close)
        self.assertTrue(c.check("login", "k").allowed)
        server.restart()
        d = c.check("login", "k")
        self.assertIsNone(d.error)
        self.assertEqual(d.remaining, 2)  # a fresh service: one taken

    def test_threads(self):
        server = Server()
        self.addCleanup(server.stop)
        c = Client(server.url, timeout=5)
        self.addCleanup(c.close)
        allowed = []

        def work():
            for _ in range(10):
                allowed.append(c.check("api", "shared").allowed)
        threads = [threading.Thread(target=work) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(sum(allowed), 5)  # 5/h: exactly five of the forty

    def test_fork(self):
        # A forked child does not use the connection its parent kept (they
        # would read each other's answers): it makes its own, its
        # decisions are its keys', and the parent's connection still
        # serves the parent.
        server = Server()
        self.addCleanup(server.stop)
        c = Client(server.url, timeout=5)
        self.addCleanup(c.close)
        self.assertIsNone(c.check("login", "parent").error)
        parents = [conn for conn, _ in c._idle]
        self.assertEqual(len(parents), 1)
        pid = os.fork()
        if pid == 0:  # the child: its verdict is its exit status
            ok = False
            try:
                d = c.check("login", "child")
                idle = [conn for conn, _ in c._idle]
                ok = d.error is None and d.remaining == 2 and len(idle) == 1 and idle[0] not in parents
            finally:
                os._exit(0 if ok else 1)
        deadline = time.monotonic() + 10
        while (done := os.waitpid(pid, os.WNOHANG))[0] == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        if done[0] == 0:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            self.fail("the child's call did not end")
        self.assertEqual(os.waitstatus_to_exitcode(done[1]), 0, "the child decided on a connection of its own")
        d = c.check("login", "parent")
        self.assertEqual((d.error, d.remaining), (None, 1))
        self.assertEqual([conn for conn, _ in c._idle], parents, "the parent's connection, still kept")


if __name__ == "__main__":
    unittest.main()
