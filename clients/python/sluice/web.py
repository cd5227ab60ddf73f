"""What the Django and Flask integrations share: a :class:`Limit` (a rule
of the service, how a request is keyed, what counts), and the walk of a
request through a list of limits (:func:`begin`, then :func:`end` with the
response's status). Framework-neutral: a request is seen through a
:class:`RequestView`."""

import base64
import hashlib
import hmac
import json
import logging
import re
import uuid
from dataclasses import dataclass, field
from typing import Callable, List, Optional, Sequence, Tuple

from .client import Client, Decision, SluiceError, Unavailable

__all__ = ["Limit", "RequestView", "Pass", "begin", "end", "ConfigurationError", "problem", "NO_KEY"]

log = logging.getLogger("sluice")

# The key of a request from which its Limit derives none (no such header
# or field): all such requests share one allowance, as httplimit's do,
# rather than pass unlimited.
NO_KEY = "(none)"

# Header values longer than this are hashed before they are sent, so a
# huge header is one bounded key, never a request the service refuses.
MAX_PLAIN_KEY = 256


class ConfigurationError(SluiceError):
    """A limit does not fit the service: its rule has other limits than
    the declared ``rate``. (An unknown rule raises
    :class:`sluice.InvalidRequest`, also naming the rule.)"""


class RequestView:
    """How a limit sees a request; each integration subclasses it."""

    method = "GET"
    path = "/"

    def remote_addr(self) -> str:
        raise NotImplementedError

    def header(self, name) -> Optional[str]:
        raise NotImplementedError

    def form(self, name) -> Optional[str]:
        raise NotImplementedError


_UNITS = {"s": 1, "sec": 1, "second": 1, "m": 60, "min": 60, "minute": 60,
          "h": 3600, "hour": 3600, "d": 86400, "day": 86400}
_RATE = re.compile(r"^\s*(\d+)\s*/\s*(\d*)\s*([a-z]+?)s?\s*$")
_ITEM = re.compile(r";\s*q=(\d+)\s*;\s*w=(\d+)")


def parse_rate(rate: str) -> Tuple[int, int]:
    """"5/min" -> (5, 60); "100/15m" -> (100, 900)."""
    m = _RATE.match(rate.lower())
    if not m or m.group(3) not in _UNITS:
        raise ValueError(f"sluice: rate {rate!r}: want N/unit, such as 5/min or 100/15m")
    return int(m.group(1)), int(m.group(2) or 1) * _UNITS[m.group(3)]


@dataclass
class Limit:
    """One rule of the service applied to requests.

    - ``rule``: the rule's name in the service's configuration.
    - ``key``: ``"ip"`` (the client's address; default), ``"header:NAME"``,
      ``"field:NAME"`` (a POST field, lower-cased, trimmed and hashed:
      base64url of its SHA-256, or HMAC-SHA-256 with ``secret``, as
      httplimit.FormField does), or a callable(request) returning a key.
    - ``rate``: the limit the rule is expected to have ("5/min"); the
      first answer is compared with it and a mismatch raises
      :class:`ConfigurationError`. Default None: not checked.
    - ``only_failures``: count only requests whose response is a failure
      (``is_failure(status)``, by default a 4xx other than 429): a place
      is reserved before the view and given back after a success.
    - ``reset_on_success``: forget the key's count after a success.
    - ``shadow``: never refuse; mark the request limited instead.
    - ``methods``, ``paths``: which requests count (default all; paths are
      prefixes).
    """

    rule: str
    key: object = "ip"
    rate: Optional[str] = None
    cost: int = 1
    only_failures: bool = False
    reset_on_success: bool = False
    shadow: bool = False
    methods: Optional[Sequence[str]] = None
    paths: Optional[Sequence[str]] = None
    is_failure: Optional[Callable[[int], bool]] = None
    secret: Optional[bytes] = None
    _rate_checked: bool = field(default=False, init=False, repr=False)

    def __post_init__(self):
        if not self.rule or not isinstance(self.rule, str):
            raise ValueError("sluice: a limit needs the name of a rule of the service")
        if self.rate is not None:
            self._want = parse_rate(self.rate)
        if isinstance(self.key, str) and not (self.key == "ip" or self.key.startswith(("header:", "field:"))):
            raise ValueError(f"sluice: rule {self.rule!r}: key {self.key!r}: want 'ip', 'header:NAME', 'field:NAME' or a callable")
        if self.methods:
            self.methods = tuple(m.upper() for m in self.methods)
        if isinstance(self.secret, str):
            self.secret = self.secret.encode()

    def applies(self, req: RequestView) -> bool:
        if self.methods and req.method.upper() not in self.methods:
            return False
        if self.paths and not any(req.path.startswith(p) for p in self.paths):
            return False
        return True

    def key_of(self, req: RequestView):
        k = self.key
        if callable(k):
            v = k(req.request if hasattr(req, "request") else req)
        elif k == "ip":
            v = req.remote_addr()
        elif k.startswith("header:"):
            v = req.header(k[len("header:"):])
            if v is not None and len(v) > MAX_PLAIN_KEY:
                v = "sha256:" + hashlib.sha256(v.encode("utf-8", "surrogateescape")).hexdigest()
        else:
            v = req.form(k[len("field:"):])
            v = self.hash_field(v) if v and v.strip() else None
        return v if v else NO_KEY

    def hash_field(self, value: str) -> str:
        raw = value.strip().lower().encode("utf-8", "surrogateescape")
        if self.secret:
            digest = hmac.new(self.secret, raw, hashlib.sha256).digest()
        else:
            digest = hashlib.sha256(raw).digest()
        return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()

    def failed(self, status: int) -> bool:
        if self.is_failure is not None:
            return bool(self.is_failure(status))
        return 400 <= status < 500 and status != 429

    def check_rate(self, d: Decision, headers) -> None:
        if self.rate is None or self._rate_checked or d.error is not None:
            return
        policy = dict(headers).get("RateLimit-Policy")
        if not policy:
            return
        items = [(int(q), int(w)) for q, w in _ITEM.findall(policy)]
        if self._want not in items:
            raise ConfigurationError(
                f"sluice: rule {self.rule!r} is {policy!r} at the service, not {self.rate} as declared")
        self._rate_checked = True


@dataclass
class Pass:
    """One request's walk through its limits: the decisions taken, what is
    to be settled after the response, and whether a shadow limit would
    have refused it (``limited``)."""

    taken: List[tuple] = field(default_factory=list)  # (limit, key, id, decision)
    denied: Optional[Decision] = None
    limited: bool = False

    @property
    def decisions(self) -> List[Decision]:
        return [d for _, _, _, d in self.taken]

    def headers(self) -> Tuple[Tuple[str, str], ...]:
        """The RateLimit fields to put on the response: the denial's, or
        the enforced decision with the fewest units remaining."""
        if self.denied is not None:
            hs = list(self.denied.headers)
            if not self.denied.allowed:
                hs.append(("Retry-After", str(max(1, self.denied.retry_after_seconds))))
            return tuple(hs)
        best = None
        for lim, _, _, d in self.taken:
            if not lim.shadow and d.headers and (best is None or d.remaining < best.remaining):
                best = d
        return best.headers if best else ()


def begin(client: Client, limits: Sequence[Limit], req: RequestView) -> Pass:
    """Asks the service about req under each limit that applies, in order,
    and stops at the first that refuses it (``denied``); the places the
    earlier limits reserved are given back."""
    p = Pass()
    for lim in limits:
        if not lim.applies(req):
            continue
        key = lim.key_of(req)
        rid = ""
        if lim.only_failures:
            rid = uuid.uuid4().hex
            d = client.reserve(lim.rule, key, rid, lim.cost)
        else:
            d = client.check(lim.rule, key, lim.cost)
        lim.check_rate(d, d.headers)
        if d.allowed and d.shadowed:
            p.limited = True
        if not d.allowed and lim.shadow:
            p.limited = True
            continue  # nothing was taken, nothing to settle
        p.taken.append((lim, key, rid, d))
        if not d.allowed:
            p.taken.pop()
            _settle(client, p.taken, failed=False, reset=False)
            p.taken = []
            p.denied = d
            return p
    return p


def end(client: Client, p: Pass, status: int) -> None:
    """Settles the limits of a request whose response had status: keeps
    the reserved places of a failure, gives back those of a success, and
    resets the keys of limits with reset_on_success after a success."""
    for lim, key, rid, d in p.taken:
        _settle(client, [(lim, key, rid, d)], failed=lim.failed(status), reset=lim.reset_on_success)


def _settle(client, taken, failed, reset):
    for lim, key, rid, d in taken:
        if d.error is not None:
            continue  # the failure policy decided: nothing is held
        try:
            if rid and d.allowed:
                if failed:
                    client.commit(lim.rule, key, rid, lim.cost)
                else:
                    client.refund(lim.rule, key, rid, lim.cost)
            if reset and not failed:
                client.reset(lim.rule, key)
        except Unavailable as e:
            log.warning("sluice: rule %r: settling a request: %s", lim.rule, e)


def problem(d: Decision) -> bytes:
    """The body of a 429: RFC 9457 problem details, as httplimit answers."""
    return json.dumps({
        "type": "about:blank", "title": "Too Many Requests", "status": 429,
        "detail": f"rate limit of {d.rule or 'the service'} exceeded; retry in {max(1, d.retry_after_seconds)}s",
    }).encode()
