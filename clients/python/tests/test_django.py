"""The Django decorator and middleware, through Django's test client,
against a real sluice serve."""

import time
import unittest

from . import djangoapp  # noqa: F401  (configures Django)
from django.test import Client as DjangoClient, override_settings

import sluice.django
from sluice import ConfigurationError, InvalidRequest

from .support import Server, load_script


class DjangoTest(unittest.TestCase):
    def setUp(self):
        self.server = Server()
        self.addCleanup(self.server.stop)
        self.settings(URL=self.server.url)

    def settings(self, **conf):
        base = {"URL": self.server.url, "TIMEOUT": 5,
                "LIMITS": [{"rule": "api", "paths": ["/api/"], "key": "header:X-Api-Key"}]}
        base.update(conf)
        o = override_settings(SLUICE=base)
        o.enable()
        self.addCleanup(o.disable)
        sluice.django._reset_client()
        self.addCleanup(sluice.django._reset_client)

    def post_login(self, step):
        return DjangoClient().post("/login", {"user": step["user"], "password": step["password"]},
                                   REMOTE_ADDR=step["address"])

    def test_form_script(self):
        # A login form attacked from several addresses, and a user who
        # keeps signing in: the Go client's decisions.
        for i, step in enumerate(load_script()["form"]):
            with self.subTest(i=i, step=step):
                resp = self.post_login(step)
                self.assertEqual(resp.status_code, step["want"])
                self.assertIn("RateLimit", resp.headers)
                self.assertIn("RateLimit-Policy", resp.headers)
                if resp.status_code == 429:
                    self.assertGreater(int(resp.headers["Retry-After"]), 0)
                    self.assertEqual(resp.headers["Content-Type"], "application/problem+json")

    def test_middleware(self):
        c = DjangoClient()
        got = [c.get("/api/items", HTTP_X_API_KEY="key-1").status_code for _ in range(6)]
        self.assertEqual(got, [200] * 5 + [429])
        resp = c.get("/api/items", HTTP_X_API_KEY="key-2")
        self.assertEqual(resp.status_code, 200)
        self.assertEqual(resp.headers["RateLimit"], '"api-1h";r=4;t=720')
        self.assertEqual(resp.headers["RateLimit-Policy"], '"api-1h";q=5;w=3600, "api-1d";q=20;w=86400')
        # Paths the limits do not name are not asked about.
        self.assertEqual(c.get("/comment", REMOTE_ADDR="192.0.2.1").status_code, 200)

    def test_shadow(self):
        c = DjangoClient()
        got = [c.get("/comment", REMOTE_ADDR="192.0.2.9").content for _ in range(5)]
        self.assertEqual(got, [b"posted"] * 3 + [b"dropped"] * 2)

    def test_misconfigured(self):
        c = DjangoClient(raise_request_exception=True)
        with self.assertRaisesRegex(ConfigurationError, "rule 'login'.*not 10/min"):
            c.get("/misdeclared", REMOTE_ADDR="192.0.2.1")
        with self.assertRaisesRegex(InvalidRequest, "rule 'logn'.*unknown rule"):
            c.get("/misspelt", REMOTE_ADDR="192.0.2.1")

    def test_service_stops(self):
        # The service stops in the middle of an attack: failing open, the
        # form answers as if unlimited; failing closed, 429 to everyone;
        # either way no request waits much longer than the timeout.
        step = {"user": "alice", "password": "guess", "address": "198.51.100.1"}
        self.assertEqual(self.post_login(step).status_code, 401)
        self.server.stop()
        for failure, want in (("open", 401), ("closed", 429)):
            self.settings(TIMEOUT=0.3, FAILURE=failure)
            for _ in range(3):
                started = time.monotonic()
                resp = self.post_login(step)
                self.assertLess(time.monotonic() - started, 10.0)  # a hang guard: a loaded machine may take seconds
                self.assertEqual(resp.status_code, want)
                if want == 429:
                    self.assertEqual(resp.headers["Retry-After"], "1")
        self.settings(TIMEOUT=0.3, FAILURE="open")
        self.assertEqual(self.post_login({**step, "password": "right"}).status_code, 200)


if __name__ == "__main__":
    unittest.main()
