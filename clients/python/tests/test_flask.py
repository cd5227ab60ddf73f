"""The Flask extension, through Flask's test client, against a real
sluice serve."""

import time
import unittest

from flask import Flask, g

from sluice import ConfigurationError, InvalidRequest
from sluice.flask import Sluice

from .support import Server, load_script


def make_app(url, **config):
    app = Flask(__name__)
    app.config.update(SLUICE_URL=url, SLUICE_TIMEOUT=5,
                      SLUICE_LIMITS=[{"rule": "api", "paths": ["/api/"], "key": "header:X-Api-Key"}])
    app.config.update(config)
    sluice = Sluice(app)

    @app.post("/login")
    @sluice.limit("form-ip", key="ip", only_failures=True, reset_on_success=True, rate="3/h")
    @sluice.limit("form-user", key="field:user", only_failures=True)
    def login():
        from flask import request
        if request.form.get("password") == "right":
            return "welcome"
        return "wrong username or password", 401

    @app.get("/api/items")
    def items():
        return {"ok": True}

    @app.get("/comment")
    @sluice.limit("login", shadow=True)
    def comment():
        return "dropped" if g.sluice_limited else "posted"

    @app.get("/misdeclared")
    @sluice.limit("login", rate="10/min")
    def misdeclared():
        return "ok"

    @app.get("/misspelt")
    @sluice.limit("logn")
    def misspelt():
        return "ok"

    return app


class FlaskTest(unittest.TestCase):
    def setUp(self):
        self.server = Server()
        self.addCleanup(self.server.stop)
        self.app = make_app(self.server.url)
        self.client = self.app.test_client()

    def post_login(self, step, client=None):
        return (client or self.client).post("/login", data={"user": step["user"], "password": step["password"]},
                                            environ_base={"REMOTE_ADDR": step["address"]})

    def test_form_script(self):
        for i, step in enumerate(load_script()["form"]):
            with self.subTest(i=i, step=step):
                resp = self.post_login(step)
                self.assertEqual(resp.status_code, step["want"])
                self.assertIn("RateLimit", resp.headers)
                if resp.status_code == 429:
                    self.assertGreater(int(resp.headers["Retry-After"]), 0)
                    self.assertEqual(resp.headers["Content-Type"], "application/problem+json")

    def test_global_limits(self):
        got = [self.client.get("/api/items", headers={"X-Api-Key": "key-1"}).status_code for _ in range(6)]
        self.assertEqual(got, [200] * 5 + [429])
        resp = self.client.get("/api/items", headers={"X-Api-Key": "key-2"})
        self.assertEqual(resp.headers["RateLimit-Policy"], '"api-1h";q=5;w=3600, "api-1d";q=20;w=86400')

    def test_shadow(self):
        got = [self.client.get("/comment", environ_base={"REMOTE_ADDR": "192.0.2.9"}).data for _ in range(5)]
        self.assertEqual(got, [b"posted"] * 3 + [b"dropped"] * 2)

    def test_misconfigured(self):
        self.app.testing = True  # exceptions reach the test
        with self.assertRaisesRegex(ConfigurationError, "rule 'login'.*not 10/min"):
            self.client.get("/misdeclared")
        with self.assertRaisesRegex(InvalidRequest, "rule 'logn'.*unknown rule"):
            self.client.get("/misspelt")

    def test_service_stops(self):
        step = {"user": "alice", "password": "guess", "address": "198.51.100.1"}
        self.assertEqual(self.post_login(step).status_code, 401)
        self.server.stop()
        for failure, want in (("open", 401), ("closed", 429)):
            client = make_app(self.server.url, SLUICE_TIMEOUT=0.3, SLUICE_FAILURE=failure).test_client()
            for _ in range(3):
                started = time.monotonic()
                resp = self.post_login(step, client)
                self.assertLess(time.monotonic() - started, 10.0)  # a hang guard: a loaded machine may take seconds
                self.assertEqual(resp.status_code, want)


if __name__ == "__main__":
    unittest.main()
