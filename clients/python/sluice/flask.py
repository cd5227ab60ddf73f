"""Flask integration: the :class:`Sluice` extension. ``SLUICE_URL``,
``SLUICE_TIMEOUT``, ``SLUICE_FAILURE`` ("open" or "closed") and
``SLUICE_LIMITS`` (dicts of :class:`sluice.web.Limit`'s options, applied
to every request they match) configure it; ``sluice.limit(...)``
decorates a view::

    app = Flask(__name__)
    app.config["SLUICE_URL"] = "http://127.0.0.1:8080"
    sluice = Sluice(app)

    @app.post("/login")
    @sluice.limit("login", only_failures=True)
    def login(): ...

A refused request gets 429 with Retry-After and the RateLimit fields;
``flask.g.sluice_limited`` tells a view whether a shadow limit would have
refused it.
"""

import functools

from flask import Response, g, make_response, request

from .client import Client
from .web import Limit, RequestView, begin, end, problem

__all__ = ["Sluice"]


class _View(RequestView):
    def __init__(self, req):
        self.request = req
        self.method = req.method
        self.path = req.path

    def remote_addr(self):
        return self.request.remote_addr or ""

    def header(self, name):
        return self.request.headers.get(name)

    def form(self, name):
        return self.request.form.get(name) if self.request.method == "POST" else None


def _denied(p):
    resp = Response(problem(p.denied), status=429, content_type="application/problem+json")
    for name, value in p.headers():
        resp.headers[name] = value
    return resp


class Sluice:
    """The extension: one :class:`sluice.Client` per application."""

    def __init__(self, app=None, client=None):
        self.client = client
        self.limits = []
        if app is not None:
            self.init_app(app)

    def init_app(self, app):
        if self.client is None:
            self.client = Client(app.config.get("SLUICE_URL", "http://127.0.0.1:8080"),
                                 timeout=app.config.get("SLUICE_TIMEOUT", 0.5),
                                 failure=app.config.get("SLUICE_FAILURE", "open"),
                                 fail_retry_after=app.config.get("SLUICE_FAIL_RETRY_AFTER", 1.0))
        self.limits = [Limit(**spec) for spec in app.config.get("SLUICE_LIMITS", [])]
        app.extensions["sluice"] = self
        if self.limits:
            app.before_request(self._before)
            app.after_request(self._after)

    def _before(self):
        p = begin(self.client, self.limits, _View(request))
        g.sluice_limited = getattr(g, "sluice_limited", False) or p.limited
        if p.denied is not None:
            return _denied(p)
        g._sluice_pass = p
        return None

    def _after(self, response):
        p = g.pop("_sluice_pass", None)
        if p is not None:
            end(self.client, p, response.status_code)
            for name, value in p.headers():
                response.headers[name] = value
        return response

    def limit(self, rule, **options):
        """Decorates a view with a limit of the service's rule; options
        are :class:`sluice.web.Limit`'s."""
        lim = Limit(rule, **options)

        def decorator(view):
            @functools.wraps(view)
            def wrapped(*args, **kwargs):
                p = begin(self.client, [lim], _View(request))
                g.sluice_limited = getattr(g, "sluice_limited", False) or p.limited
                if p.denied is not None:
                    return _denied(p)
                try:
                    resp = make_response(view(*args, **kwargs))
                except BaseException:
                    end(self.client, p, 500)
                    raise
                end(self.client, p, resp.status_code)
                for name, value in p.headers():
                    resp.headers[name] = value
                return resp
            return wrapped
        return decorator
