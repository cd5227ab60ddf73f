"""Django integration: the :func:`ratelimit` view decorator and
:class:`RateLimitMiddleware`, configured by the ``SLUICE`` setting::

    SLUICE = {
        "URL": "http://127.0.0.1:8080",   # sluice serve's HTTP API
        "TIMEOUT": 0.5,                   # seconds, per call
        "FAILURE": "open",                # or "closed": when the service is down
        "LIMITS": [                       # for the middleware
            {"rule": "api", "paths": ["/api/"]},
        ],
    }

A refused request gets 429 with Retry-After and the RateLimit fields, as
problem details; an allowed one the RateLimit fields. ``request.limited``
tells the view whether a shadow limit would have refused it, and
``request.sluice`` holds the decisions.
"""

import functools
import os
import threading

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.http import HttpResponse

from .client import Client
from .web import Limit, RequestView, begin, end, problem

__all__ = ["ratelimit", "RateLimitMiddleware", "get_client"]

_client = None
_client_lock = threading.Lock()


def _unlock_in_child():
    """A forked child gets a lock of its own: the parent's may have been
    held by a thread that the child does not have."""
    global _client_lock
    _client_lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_unlock_in_child)


def get_client() -> Client:
    """The Client the ``SLUICE`` setting describes, made once."""
    global _client
    with _client_lock:
        if _client is None:
            conf = getattr(settings, "SLUICE", {})
            try:
                _client = Client(conf.get("URL", "http://127.0.0.1:8080"), timeout=conf.get("TIMEOUT", 0.5),
                                 failure=conf.get("FAILURE", "open"), fail_retry_after=conf.get("FAIL_RETRY_AFTER", 1.0))
            except ValueError as e:
                raise ImproperlyConfigured(f"SLUICE: {e}") from e
        return _client


def _reset_client():
    """Forgets the Client, for tests that change the setting."""
    global _client
    with _client_lock:
        if _client is not None:
            _client.close()
        _client = None


class _View(RequestView):
    def __init__(self, request):
        self.request = request
        self.method = request.method
        self.path = request.path

    def remote_addr(self):
        return self.request.META.get("REMOTE_ADDR", "")

    def header(self, name):
        return self.request.headers.get(name)

    def form(self, name):
        return self.request.POST.get(name) if self.request.method == "POST" else None


def _guarded(client, limits, request, call):
    p = begin(client, limits, _View(request))
    request.limited = p.limited
    request.sluice = p.decisions
    if p.denied is not None:
        resp = HttpResponse(problem(p.denied), status=429, content_type="application/problem+json")
    else:
        try:
            resp = call()
        except BaseException:
            end(client, p, 500)
            raise
        end(client, p, resp.status_code)
    for name, value in p.headers():
        resp[name] = value
    return resp


def ratelimit(rule, *, key="ip", rate=None, cost=1, methods=None, only_failures=False,
              reset_on_success=False, shadow=False, is_failure=None, secret=None, client=None):
    """Limits a view by the service's rule; the options are
    :class:`sluice.web.Limit`'s. Stack several: the outer one is asked
    first, and a request it lets through that an inner one refuses is
    not counted by it when it counts only failures."""
    lim = Limit(rule, key=key, rate=rate, cost=cost, methods=methods, only_failures=only_failures,
                reset_on_success=reset_on_success, shadow=shadow, is_failure=is_failure, secret=secret)

    def decorator(view):
        @functools.wraps(view)
        def wrapped(request, *args, **kwargs):
            return _guarded(client or get_client(), [lim], request, lambda: view(request, *args, **kwargs))
        return wrapped
    return decorator


class RateLimitMiddleware:
    """Applies ``SLUICE["LIMITS"]`` (dicts of :class:`Limit`'s options) to
    every request they match."""

    def __init__(self, get_response):
        self.get_response = get_response
        specs = getattr(settings, "SLUICE", {}).get("LIMITS", [])
        try:
            self.limits = [Limit(**spec) for spec in specs]
        except (TypeError, ValueError) as e:
            raise ImproperlyConfigured(f"SLUICE['LIMITS']: {e}") from e

    def __call__(self, request):
        return _guarded(get_client(), self.limits, request, lambda: self.get_response(request))
