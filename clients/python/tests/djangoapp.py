"""A Django project in one module, for the tests: a login form behind the
script's two limits, an API under the middleware's limits, a comment form
in shadow mode. Settings are configured once per process."""

import django
from django.conf import settings
from django.http import HttpResponse, JsonResponse
from django.urls import path

if not settings.configured:
    settings.configure(
        DEBUG=False,
        SECRET_KEY="test",
        ALLOWED_HOSTS=["*"],
        ROOT_URLCONF=__name__,
        MIDDLEWARE=["sluice.django.RateLimitMiddleware"],
        SLUICE={
            "URL": "http://127.0.0.1:9",  # set by the tests
            "TIMEOUT": 5,
            "LIMITS": [{"rule": "api", "paths": ["/api/"], "key": "header:X-Api-Key"}],
        },
    )
    django.setup()

from sluice.django import ratelimit  # noqa: E402  (after settings)


@ratelimit("form-ip", key="ip", only_failures=True, reset_on_success=True, rate="3/h")
@ratelimit("form-user", key="field:user", only_failures=True, rate="5/hour")
def login(request):
    if request.POST.get("password") == "right":
        return HttpResponse("welcome")
    return HttpResponse("wrong username or password", status=401)


def api(request):
    return JsonResponse({"ok": True})


@ratelimit("login", key="ip", shadow=True)
def comment(request):
    # A shadow limit lets the spammer through, marked: accept the comment
    # and drop it, so that the spammer does not learn it was caught.
    return HttpResponse("dropped" if request.limited else "posted")


@ratelimit("login", key="ip", rate="10/min")
def misdeclared(request):
    return HttpResponse("ok")


@ratelimit("logn", key="ip")
def misspelt(request):
    return HttpResponse("ok")


urlpatterns = [
    path("login", login),
    path("api/items", api),
    path("comment", comment),
    path("misdeclared", misdeclared),
    path("misspelt", misspelt),
]
