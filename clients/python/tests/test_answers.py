"""The client's shortcuts through an answer (its JSON, its header, its
Decision) give what the long way gives."""

import dataclasses
import json
import pickle
import unittest

from sluice import Client, Decision
from sluice import client as impl

from .support import MisbehavingServer


def long_way(a, headers):
    """The Decision of answer a, converted field by field."""
    if not isinstance(a.get("allowed"), bool):
        raise impl.Unavailable("not a decision")
    return Decision(
        allowed=a["allowed"], rule=str(a.get("rule", "")), limit=impl._int(a, "limit"),
        policy=str(a.get("policy", "")), remaining=impl._int(a, "remaining"),
        reset_after=impl._num(a, "reset_after"), retry_after=impl._num(a, "retry_after"),
        shadowed=bool(a.get("shadowed")), guard=str(a.get("guard", "")),
        duplicate=bool(a.get("duplicate")), expires=str(a.get("expires", "")), headers=headers)


def members(d):
    """A Decision's attributes, by name."""
    return {f.name: getattr(d, f.name) for f in dataclasses.fields(d)}


class Answers(unittest.TestCase):
    def test_decision(self):
        header = b'HTTP/1.1 200 OK\r\nratelimit:  "api";r=4;t=720 \r\n\r\n{"allowed":true}'
        headers = (("RateLimit", '"api";r=4;t=720'),)
        answers = [
            {"allowed": True, "rule": "api", "limit": 5, "policy": "5/h", "remaining": 4, "reset_after": 720,
             "retry_after": 0},
            {"allowed": False, "rule": "api", "limit": 5, "policy": "5/h", "remaining": 0, "reset_after": 1.5,
             "retry_after": 719.25, "shadowed": True, "guard": "jail", "duplicate": True, "expires": "soon"},
            {"allowed": True},
            {"allowed": True, "limit": 5.0, "remaining": "4", "rule": 7, "reset_after": True, "retry_after": None},
            {"allowed": True, "shadowed": 1, "guard": None, "expires": 3},
            {"allowed": True, "future": "field"},
            {"allowed": True, "error": "x", "headers": "y"},
        ]
        for a in answers:
            with self.subTest(a=a):
                got, want = impl._decision(a, header, "/v1/check"), long_way(a, headers)
                self.assertEqual(members(got), members(want))
                self.assertEqual([type(v) for v in members(got).values()], [type(v) for v in members(want).values()])
                self.assertEqual(repr(got), repr(want))
                self.assertEqual(got, want)
                self.assertEqual(hash(got), hash(want))
        for a in ({}, {"allowed": "yes"}, {"allowed": 1}, {"allowed": None}):
            with self.subTest(a=a), self.assertRaises(impl.Unavailable):
                impl._decision(a, b"", "/v1/check")

    def test_headers_found_late(self):
        # A Decision's RateLimit fields, found when first asked for, are
        # those of its own answer, whatever its bytes; its copies and
        # what reads every field find them too.
        a = {"allowed": True, "rule": "api", "limit": 5, "policy": "5/h", "remaining": 4, "reset_after": 720.0,
             "retry_after": 0.0}
        for header, want in [
            (b"HTTP/1.1 200 OK\r\nRateLimit: \"\xc3\xa9\xff\";r=4\r\nRateLimit-Policy: x\r\n\r\nRateLimit: body",
             (("RateLimit", '"\xc3\xa9\xff";r=4'), ("RateLimit-Policy", "x"))),
            (b"HTTP/1.1 200 OK\r\nRATELIMIT-POLICY:y\r\nratelimit-policy: z", (("RateLimit-Policy", "z"),)),
            (b"HTTP/1.1 200 OK\r\nX-RateLimit: 1\r\nRateLimitX: 2\r\n\r\n", ()),
        ]:
            with self.subTest(header=header):
                self.assertEqual(impl._decision(a, header, "/v1/check").headers, want)
                self.assertEqual(dataclasses.asdict(impl._decision(a, header, "/v1/check"))["headers"], want)
                self.assertEqual(dataclasses.replace(impl._decision(a, header, "/v1/check")).headers, want)
                self.assertEqual(pickle.loads(pickle.dumps(impl._decision(a, header, "/v1/check"))).headers, want)
                self.assertIn(repr(want), repr(impl._decision(a, header, "/v1/check")))
        self.assertEqual(Decision.headers, ())
        self.assertEqual(Decision(True).headers, ())

    def test_json(self):
        for data in (b'{"allowed":true,"k":"\xc3\xa9"}\n', b'{"a":1}', b' {"a":1}', b'{"a":1} \r\n\t', b'{"a":1} x',
                     b'{"a":1}\xc2\xa0', b"[1]", b'"s"', b'{"a":"\xff"}', b"", b"{", b'\xef\xbb\xbf{"a":1}'):
            with self.subTest(data=data):
                try:
                    want = json.loads(data)
                except ValueError as e:
                    with self.assertRaises(ValueError, msg=str(e)):
                        impl._loads(data)
                else:
                    self.assertEqual(impl._loads(data), want)

    def test_status_line(self):
        # The usual status line, read in place, gives the code its split
        # gives; any other is split.
        class Stub:
            def __init__(self, answer):
                self.answer = answer

            def sendall(self, data):
                pass

            def recv(self, n):
                return self.answer

        for line in (b"HTTP/1.1 200 OK", b"HTTP/1.1 200", b"HTTP/1.1 200\rX", b"HTTP/1.1 200\tOK", b"HTTP/1.1 2000 OK",
                     b"HTTP/1.0 429 Too Many Requests", b"HTTP/1.1  200 OK", b"HTTP/1.1 20x OK", b"HTTP/1.1 200 ",
                     b"HTTP/1.1 \xd9\xa0\xd9\xa0\xd9\xa0", b"HTTP/2 200 OK", b"HTTP/1.1", b" HTTP/1.1 200 OK"):
            answer = line + b"\r\nContent-Length: 2\r\n\r\n{}"
            with self.subTest(line=line):
                conn = object.__new__(impl._Connection)
                conn.sock, conn.buf, conn.timeout = Stub(answer), b"", 5.0
                parts = line.split(None, 2)
                if len(parts) < 2 or not parts[0].startswith(b"HTTP/1.") or not parts[1].isdigit():
                    with self.assertRaisesRegex(ValueError, "not HTTP"):
                        conn.round_trip(b"", 1e12, 5.0)
                else:
                    self.assertEqual(conn.round_trip(b"", 1e12, 5.0)[0], int(parts[1]))
                    self.assertEqual(impl._status_line(answer), parts)

    def test_header(self):
        # Fields in any case, a chunked body, the last field of a name wins.
        body = b'{"allowed":false,"rule":"api","remaining":0,"retry_after":2}'
        answer = (b"HTTP/1.1 429 Too Many Requests\r\nratelimit: \"old\"\r\nRATELIMIT:  \"api\";r=0;t=2 \r\n"
                  b"Transfer-Encoding: Chunked\r\nRateLimit-Policy:\"api\";q=5;w=3600\r\n\r\n"
                  b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body))
        server = MisbehavingServer(lambda data: answer.replace(b"429 Too Many Requests", b"200 OK"))
        self.addCleanup(server.close)
        c = Client(server.url, timeout=5)
        self.addCleanup(c.close)
        decisions = [c.check("api", "k") for _ in range(2)]  # the second on the kept-alive connection
        for d in decisions:
            self.assertIsNone(d.error)
            self.assertFalse(d.allowed)
            self.assertEqual(d.retry_after, 2.0)
            self.assertEqual(d.headers, (("RateLimit", '"api";r=0;t=2'), ("RateLimit-Policy", '"api";q=5;w=3600')))


if __name__ == "__main__":
    unittest.main()
