"""Runs the snippets of docs/python.md against a sluice serve of the
page's own rules: each python block in order, in one namespace, with
http://127.0.0.1:8080 replaced by the service's address; a text block
after a snippet is what it must print. The Django and Flask snippets are
then driven through their frameworks' test clients."""

import contextlib
import io
import os
import re
import tempfile
import unittest

from . import djangoapp  # noqa: F401  (configures Django)
from django.test import RequestFactory, override_settings

import sluice.django

from .support import REPO, Server

PAGE = os.path.join(REPO, "docs", "python.md")
BLOCK = re.compile(r"^```(\w+)\n(.*?)^```\n", re.S | re.M)


def blocks(path):
    """The fenced blocks of path: (language, text), in order."""
    with open(path, encoding="utf-8") as f:
        return BLOCK.findall(f.read())


class DocsTest(unittest.TestCase):
    def test_python_md(self):
        bs = blocks(PAGE)
        config = [text for lang, text in bs if lang == "yaml"]
        self.assertEqual(len(config), 1, "one yaml block: the rules")
        with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
            f.write(config[0])
        self.addCleanup(os.unlink, f.name)
        server = Server(f.name)
        self.addCleanup(server.stop)

        ns = {"__name__": "docs"}
        ran = 0
        for i, (lang, text) in enumerate(bs):
            if lang != "python":
                continue
            code = text.replace("http://127.0.0.1:8080", server.url)
            out = io.StringIO()
            with self.subTest(snippet=text.splitlines()[0]), contextlib.redirect_stdout(out):
                if code.startswith("# settings.py"):
                    self.settings_snippet(code)
                elif code.startswith("# views.py"):
                    self.views_snippet(code)
                elif "Flask(__name__)" in code:
                    self.flask_snippet(code)
                else:
                    exec(compile(code, f"{PAGE} block {i}", "exec"), ns)
            ran += 1
            if i + 1 < len(bs) and bs[i + 1][0] == "text":
                self.assertEqual(out.getvalue(), bs[i + 1][1], f"what block {i} prints")
        self.assertGreaterEqual(ran, 7)

    def settings_snippet(self, code):
        conf = {}
        exec(code, conf)
        self.assertIn("sluice.django.RateLimitMiddleware", conf["MIDDLEWARE"])
        o = override_settings(SLUICE=conf["SLUICE"])
        o.enable()
        self.addCleanup(o.disable)
        sluice.django._reset_client()
        self.addCleanup(sluice.django._reset_client)

    def views_snippet(self, code):
        views = {}
        exec(code, views)
        rf = RequestFactory()
        got = [views["sign_in"](rf.post("/login", {"username": "dave", "password": "guess"},
                                        REMOTE_ADDR="192.0.2.10")).status_code for _ in range(6)]
        self.assertEqual(got, [401] * 5 + [429])
        self.assertEqual(views["sign_in"](rf.post("/login", {"username": "erin", "password": "secret"},
                                                  REMOTE_ADDR="192.0.2.11")).status_code, 200)
        got = [views["comment"](rf.post("/comment", REMOTE_ADDR="192.0.2.12")).content for _ in range(6)]
        self.assertEqual(got, [b"posted"] * 5 + [b"thanks"])

    def flask_snippet(self, code):
        ns = {"__name__": "docs_flask"}
        exec(code, ns)
        c = ns["app"].test_client()
        env = {"REMOTE_ADDR": "192.0.2.20"}
        got = [c.post("/login", data={"password": "guess"}, environ_base=env).status_code for _ in range(6)]
        self.assertEqual(got, [401] * 5 + [429])
        resp = c.get("/api/items", headers={"X-Api-Key": "k"})
        self.assertEqual(resp.status_code, 200)
        self.assertIn('"api";q=100', resp.headers["RateLimit-Policy"])
