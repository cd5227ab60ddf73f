"""The HTTP client of sluice serve: kept-alive connections from a small
pool, a deadline on every call, and a failure policy."""

import codecs
import json
import logging
import math
import os
import re
import socket
import struct
import time
import urllib.parse
import weakref
from dataclasses import dataclass, field
from typing import Optional, Tuple

__all__ = [
    "Client",
    "Decision",
    "LoginAttempt",
    "Lease",
    "Settled",
    "SluiceError",
    "Unavailable",
    "InvalidRequest",
    "normalize_key",
]

log = logging.getLogger("sluice")

# The most of an answer the client reads: a batch of 100 answers fits
# many times over.
MAX_ANSWER = 1 << 20

# The service forwards these fields of the IETF RateLimit draft; the web
# integrations copy them onto their responses.
RATELIMIT_FIELDS = ("RateLimit", "RateLimit-Policy")


class SluiceError(Exception):
    """Base of the client's errors."""


class Unavailable(SluiceError):
    """The service did not decide: it could not be reached, did not answer
    within the timeout, answered something that is not its JSON, or its
    store failed (503). Decisions come back as the failure policy's, with
    this error as their ``error``; calls that settle raise it."""


class InvalidRequest(SluiceError, ValueError):
    """The service refused the request (a 4xx): an unknown rule, a cost
    above the rule's burst, an unknown reservation. The message names the
    rule and repeats the service's reason."""

    def __init__(self, message, status=0, rule=""):
        super().__init__(message)
        self.status = status
        self.rule = rule


@dataclass(frozen=True)
class Decision:
    """The service's answer to a check, peek, insert or outcome call.

    ``retry_after`` and ``reset_after`` are seconds (0 when allowed).
    ``headers`` are the RateLimit and RateLimit-Policy fields the service
    sent, to copy onto a response. ``error`` is set, to an
    :class:`Unavailable`, when the service did not decide and the failure
    policy did."""

    allowed: bool
    rule: str = ""
    limit: int = 0
    policy: str = ""
    remaining: int = 0
    reset_after: float = 0.0
    retry_after: float = 0.0
    shadowed: bool = False
    guard: str = ""
    duplicate: bool = False
    expires: str = ""
    headers: Tuple[Tuple[str, str], ...] = ()
    error: Optional[Exception] = field(default=None, compare=False)

    def __bool__(self):
        return self.allowed

    @property
    def retry_after_seconds(self) -> int:
        """The wait in whole seconds, rounded up, for a Retry-After field."""
        return max(0, math.ceil(self.retry_after))


@dataclass(frozen=True)
class LoginAttempt:
    """The answer to :meth:`Client.login_begin`. When ``allowed``, check
    the password, wait ``delay`` seconds before answering the person, and
    settle the attempt with :meth:`Client.login_settle`. When not, answer
    as for a wrong password, or 429 with ``retry_after``."""

    login: str
    user: str
    address: str
    allowed: bool
    ticket: str = ""
    delay: float = 0.0
    retry_after: float = 0.0
    captcha: bool = False
    known_good: bool = False
    reason: str = ""
    error: Optional[Exception] = field(default=None, compare=False)

    def __bool__(self):
        return self.allowed


@dataclass(frozen=True)
class Settled:
    """The answer to settling a login attempt."""

    duplicate: bool = False
    banned: bool = False
    ban_seconds: float = 0.0


@dataclass(frozen=True)
class Lease:
    """The answer to :meth:`Client.acquire`: ``ok`` when a place was
    granted, ``id`` to release it with."""

    rule: str
    key: str
    ok: bool
    id: str = ""
    in_use: int = 0
    limit: int = 0
    expires: str = ""
    retry_after: float = 0.0
    error: Optional[Exception] = field(default=None, compare=False)

    def __bool__(self):
        return self.ok


def _per_byte(err):
    # encoding/json in Go replaces each byte of invalid UTF-8 with U+FFFD;
    # doing the same gives a key of any bytes the key the Go client sends.
    return "\ufffd" * (err.end - err.start), err.end


codecs.register_error("sluice-per-byte", _per_byte)


def normalize_key(key) -> str:
    """Returns key as the JSON string the service is sent: bytes and str
    alike, any bytes accepted; invalid UTF-8 (and lone surrogates) become
    U+FFFD, one per byte, as the Go client's keys do."""
    if type(key) is str and key.isascii():
        return key
    if isinstance(key, (bytes, bytearray, memoryview)):
        return bytes(key).decode("utf-8", "sluice-per-byte")
    if not isinstance(key, str):
        raise TypeError(f"sluice: a key is str or bytes, not {type(key).__name__}")
    try:
        key.encode("utf-8")
        return key
    except UnicodeEncodeError:
        try:
            raw = key.encode("utf-8", "surrogateescape")
        except UnicodeEncodeError:
            raw = key.encode("utf-8", "surrogatepass")
        return raw.decode("utf-8", "sluice-per-byte")


# What json.dumps(ensure_ascii=False) writes for a str, in C.
_quote = json.encoder.encode_basestring


def _body(rule, key, cost):
    """The request body {"rule", "key", "cost"}: its JSON, as json.dumps
    writes it but without json.dumps's own work per call, when its
    values are plain (str and int); else the dict, for json.dumps."""
    key = normalize_key(key)
    if type(rule) is str and type(cost) is int:
        return f'{{"rule":{_quote(rule)},"key":{_quote(key)},"cost":{cost}}}'.encode()
    return {"rule": rule, "key": key, "cost": cost}


class _Throttled:
    """Logs a warning at most once a second."""

    def __init__(self):
        self._last = 0.0

    def warn(self, msg, *args):
        now = time.monotonic()
        if now - self._last >= 1.0:
            self._last = now
            log.warning(msg, *args)


# The clients whose pools a forked child empties (see _after_fork).
_clients = weakref.WeakSet()


def _after_fork():
    """Empties, in a forked child, the pool of every client: the
    connections it kept are shared with the parent, which goes on using
    them, and parent and child would read each other's answers. Each
    connection's descriptor is closed in the child only (closing a TLS
    socket sends no close_notify, which would end the parent's
    session)."""
    for c in list(_clients):
        idle, c._idle = c._idle, []
        for conn, _ in idle:
            conn.close()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)


class Client:
    """A client of sluice serve's HTTP JSON API at ``url``.

    Every call is one HTTP round trip on a kept-alive connection (a small
    pool, so threads do not share one), bounded by ``timeout`` seconds
    for connecting and for each read. When the service does not decide
    (down, slow, garbage, or its store failed), calls that decide return
    the decision of ``failure``: ``"open"`` allows, ``"closed"`` denies
    with ``retry_after`` = ``fail_retry_after``; either way with
    ``error`` set and a warning logged (at most one a second). A request
    the service refuses raises :class:`InvalidRequest` naming the rule.

    A Client is safe for use by many threads.
    """

    def __init__(self, url="http://127.0.0.1:8080", *, timeout=0.5, failure="open",
                 fail_retry_after=1.0, max_idle=16, idle_timeout=60.0):
        u = urllib.parse.urlsplit(url)
        if u.scheme not in ("http", "https") or not u.hostname:
            raise ValueError(f"sluice: url {url!r}: want http://host:port")
        if failure not in ("open", "closed"):
            raise ValueError(f"sluice: failure {failure!r}: want 'open' or 'closed'")
        if not timeout or timeout <= 0:
            raise ValueError("sluice: timeout must be positive seconds")
        self.url = url.rstrip("/")
        self.timeout = float(timeout)
        self.failure = failure
        self.fail_retry_after = float(fail_retry_after)
        self._https = u.scheme == "https"
        self._host = u.hostname
        self._port = u.port or (443 if self._https else 80)
        self._prefix = u.path.rstrip("/")
        self._hostheader = u.netloc
        self._heads = {}  # path: the request's bytes up to its Content-Length
        # (connection, time it became idle), most recent last. A list's
        # append and pop are atomic: threads share it without a lock.
        self._idle = []
        self._max_idle = max_idle
        # The service closes connections idle for 2 minutes: drop ours
        # sooner, so that a call seldom picks one being closed.
        self._idle_timeout = idle_timeout
        self._warn = _Throttled()
        _clients.add(self)  # a forked child empties the pool: see _after_fork

    # -- decisions -------------------------------------------------------

    def check(self, rule, key, cost=1) -> Decision:
        """Takes ``cost`` units of ``key`` under ``rule`` if they fit, and
        says whether they did."""
        return self._decide("/v1/check", rule, _body(rule, key, cost))

    def peek(self, rule, key, cost=1) -> Decision:
        """Says whether ``cost`` units would fit, taking nothing."""
        return self._decide("/v1/check", rule, {"rule": rule, "key": normalize_key(key), "cost": cost, "peek": True})

    def insert(self, rule, key, cost=1) -> Decision:
        """Counts ``cost`` whether or not it fits (a penalty; negative
        gives units back), and says whether ``key`` may still act."""
        return self._decide("/v1/insert", rule, _body(rule, key, cost))

    def reserve(self, rule, key, id, cost=1) -> Decision:
        """Takes ``cost`` now and holds it, for a minute, until
        :meth:`commit` or :meth:`refund` with the same arguments. ``id``
        (1 to 128 bytes) makes a retried call count once."""
        return self._decide("/v1/reserve", rule, self._outcome(rule, key, id, cost))

    def commit(self, rule, key, id, cost=1) -> Decision:
        """Keeps a reservation. Raises :class:`InvalidRequest` for an
        unknown or expired one, :class:`Unavailable` when the service
        does not answer."""
        return self._settle_outcome("/v1/commit", rule, self._outcome(rule, key, id, cost))

    def refund(self, rule, key, id, cost=1) -> Decision:
        """Gives a reservation back; raises as :meth:`commit` does."""
        return self._settle_outcome("/v1/refund", rule, self._outcome(rule, key, id, cost))

    def report(self, rule, key, id, outcome="failure", cost=1) -> Decision:
        """Reports the outcome of unreserved work once per ``id``:
        ``"failure"`` counts ``cost`` whether or not it fits."""
        body = self._outcome(rule, key, id, cost)
        body["outcome"] = outcome
        return self._decide("/v1/report", rule, body)

    def reset(self, rule, key) -> None:
        """Forgets ``key``'s state under ``rule``. Raises on failure."""
        self._call("/v1/reset", rule, {"rule": rule, "key": normalize_key(key)}, want=204)

    # -- logins ----------------------------------------------------------

    def login_begin(self, login, user, address, captcha_solved=False) -> LoginAttempt:
        """Begins an attempt of the service's login rule ``login``."""
        body = {"login": login, "user": normalize_key(user), "address": address}
        if captcha_solved:
            body["captcha_solved"] = True
        try:
            _, _, a = self._call("/v1/login/begin", login, body)
            if not isinstance(a.get("allowed"), bool):
                raise self._garbage("/v1/login/begin", a)
        except Unavailable as e:
            self._warn.warn("%s (login %r); failing %s", e, login, self.failure)
            return LoginAttempt(login, body["user"], address, self.failure == "open",
                                retry_after=0 if self.failure == "open" else self.fail_retry_after, error=e)
        return LoginAttempt(login, body["user"], address, a["allowed"], ticket=str(a.get("ticket", "")),
                            delay=_num(a, "delay"), retry_after=_num(a, "retry_after"),
                            captcha=bool(a.get("captcha")), known_good=bool(a.get("known_good")),
                            reason=str(a.get("reason", "")))

    def login_settle(self, attempt: LoginAttempt, success: bool) -> Settled:
        """Settles an allowed attempt as succeeded or failed, once per
        ticket. An attempt the failure policy allowed has no ticket and
        nothing to settle. Raises :class:`Unavailable` when the service
        does not answer."""
        if not attempt.ticket:
            return Settled()
        path = "/v1/login/succeed" if success else "/v1/login/fail"
        body = {"login": attempt.login, "user": attempt.user, "address": attempt.address, "ticket": attempt.ticket}
        _, _, a = self._call(path, attempt.login, body)
        return Settled(duplicate=bool(a.get("duplicate")), banned=bool(a.get("banned")),
                       ban_seconds=_num(a, "ban_seconds"))

    # -- leases ----------------------------------------------------------

    def acquire(self, rule, key, wait=0.0, priority="") -> Lease:
        """Asks for a place among the requests in flight for ``key`` under
        the concurrency rule ``rule``, waiting up to ``wait`` seconds.
        ``priority`` is "critical", "default" or "sheddable"."""
        body = {"rule": rule, "key": normalize_key(key)}
        if wait:
            body["wait"] = wait
        if priority:
            body["class"] = priority
        try:
            _, _, a = self._call("/v1/acquire", rule, body, extra=float(wait))
            if not isinstance(a.get("ok"), bool):
                raise self._garbage("/v1/acquire", a)
        except Unavailable as e:
            self._warn.warn("%s (rule %r); failing %s", e, rule, self.failure)
            return Lease(rule, body["key"], self.failure == "open", error=e)
        return Lease(rule, body["key"], a["ok"], id=str(a.get("id", "")), in_use=_int(a, "in_use"),
                     limit=_int(a, "limit"), expires=str(a.get("expires", "")), retry_after=_num(a, "retry_after"))

    def release(self, lease: Lease) -> bool:
        """Gives the lease's place back; True when it was live. A lease the
        failure policy granted has no id and nothing to release."""
        if not lease.id:
            return False
        _, _, a = self._call("/v1/release", lease.rule, {"rule": lease.rule, "key": lease.key, "id": lease.id})
        return bool(a.get("ok"))

    def close(self):
        """Closes the idle connections."""
        while True:
            try:
                conn, _ = self._idle.pop()
            except IndexError:
                return
            conn.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- internals ---------------------------------------------------------

    @staticmethod
    def _outcome(rule, key, id, cost):
        if not id:
            raise ValueError("sluice: an outcome call needs an id of 1 to 128 bytes")
        return {"rule": rule, "key": normalize_key(key), "cost": cost, "id": str(id)}

    def _decide(self, path, rule, body) -> Decision:
        try:
            _, header, a = self._call(path, rule, body)
            return _decision(a, header, path)
        except Unavailable as e:
            self._warn.warn("%s (rule %r); failing %s", e, rule, self.failure)
            return self.failed(rule, e)

    def failed(self, rule, error) -> Decision:
        """The failure policy's decision for ``rule`` when the service did
        not decide."""
        if self.failure == "open":
            return Decision(True, rule=rule, error=error)
        return Decision(False, rule=rule, retry_after=self.fail_retry_after, error=error)

    def _settle_outcome(self, path, rule, body) -> Decision:
        _, header, a = self._call(path, rule, body)
        return _decision(a, header, path)

    def _garbage(self, path, data):
        return Unavailable(f"sluice: {self.url}{path} answered {str(data)[:200]!r}, not the service's JSON")

    def _conn(self, now):
        while True:
            try:
                conn, since = self._idle.pop()
            except IndexError:
                return None, False
            if now - since < self._idle_timeout:
                return conn, True
            conn.close()

    def _put(self, conn):
        if len(self._idle) < self._max_idle:
            self._idle.append((conn, time.monotonic()))
        else:
            conn.close()

    def _call(self, path, rule, body, want=200, extra=0.0):
        """Posts body to path and returns (status, the answer's header (see
        round_trip), decoded JSON object). Raises Unavailable or InvalidRequest."""
        if type(body) is bytes:
            payload = body
        else:
            payload = json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        head = self._heads.get(path)
        if head is None:
            head = self._heads[path] = b"".join((
                b"POST ", self._prefix.encode() + path.encode(), b" HTTP/1.1\r\nHost: ", self._hostheader.encode(),
                b"\r\nContent-Type: application/json\r\nContent-Length: "))
        request = b"%s%d\r\n\r\n%s" % (head, len(payload), payload)
        timeout = self.timeout + extra
        now = time.monotonic()
        deadline = now + timeout
        for attempt in (1, 2):
            conn, reused = self._conn(now)
            try:
                if conn is None:
                    conn = _Connection(self._host, self._port, self._https, timeout)
                status, header, data, keep = conn.round_trip(request, deadline, timeout)
            except _Stale as e:
                conn.close()
                # A kept-alive connection the service closed while it was
                # idle: try once more on a new one, time permitting.
                if reused and attempt == 1 and time.monotonic() < deadline:
                    continue
                raise Unavailable(f"sluice: {self.url}{path}: {e}") from e
            except (socket.timeout, TimeoutError) as e:
                if conn is not None:
                    conn.close()
                raise Unavailable(f"sluice: {self.url}{path}: no answer within {timeout:g}s") from e
            except (OSError, ValueError) as e:
                if conn is not None:
                    conn.close()
                raise Unavailable(f"sluice: {self.url}{path}: {e or type(e).__name__}") from e
            if keep:
                self._put(conn)
            else:
                conn.close()
            return self._answer(path, rule, status, header, data, want)
        raise AssertionError("unreachable")

    def _answer(self, path, rule, status, header, data, want):
        if status == want:
            if want == 204:
                return status, header, {}
            try:
                a = _loads(data)
            except ValueError:
                a = None
            if not isinstance(a, dict):
                raise self._garbage(path, data[:200])
            return status, header, a
        detail = ""
        try:
            e = json.loads(data)
            if isinstance(e, dict):
                detail = str(e.get("detail") or e.get("error") or "")
        except ValueError:
            pass
        detail = detail or data[:200].decode("utf-8", "replace").strip()
        reason = _status_line(header)[2:]
        reason = reason[0].strip().decode("latin-1") if reason else ""
        msg = f"sluice: rule {rule!r}: {path}: {status} {reason}: {detail}"
        if 400 <= status < 500 and status not in (408, 429):
            raise InvalidRequest(msg, status=status, rule=rule)
        raise Unavailable(msg)


_scan = json.JSONDecoder().scan_once


def _loads(data):
    """json.loads(data) for an object in UTF-8, as the service sends,
    without json.loads's own work per call (it guesses the encoding);
    anything else goes to json.loads."""
    try:
        s = data.rstrip(b" \t\n\r").decode()
        a, end = _scan(s, 0)
        if end == len(s):
            return a
    except (StopIteration, ValueError):
        pass
    return json.loads(data)


class _Stale(Exception):
    """A reused connection was found closed before any answer."""


class _Connection:
    """One kept-alive HTTP/1.1 connection, spoken directly on a socket.
    http.client parses every answer's header with the email package, and
    a socket timeout polls before every read and write: each costs more
    than the rest of the client. This connection blocks with the kernel's
    own timeouts (SO_RCVTIMEO, SO_SNDTIMEO) and checks the call's
    deadline between reads."""

    def __init__(self, host, port, https, timeout):
        sock = socket.create_connection((host, port), timeout)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if https:
            import ssl
            sock = ssl.create_default_context().wrap_socket(sock, server_hostname=host)
        sock.settimeout(None)
        self.sock = sock
        self.buf = b""
        self.timeout = None
        self._set_timeout(timeout)

    def _set_timeout(self, timeout):
        if timeout != self.timeout:
            tv = struct.pack("ll", int(timeout), int(timeout % 1 * 1e6))
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, tv)
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, tv)
            self.timeout = timeout

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

    def _more(self, deadline):
        if time.monotonic() > deadline:
            raise socket.timeout("deadline")
        try:
            data = self.sock.recv(65536)
        except BlockingIOError as e:  # SO_RCVTIMEO ran out
            raise socket.timeout("timed out") from e
        if not data:
            raise ValueError("the answer ended early")
        if len(self.buf) + len(data) > MAX_ANSWER + 65536:
            raise ValueError("an answer of more than 1 MiB")
        self.buf += data

    def _line(self, deadline):
        while True:
            i = self.buf.find(b"\r\n")
            if i >= 0:
                line, self.buf = self.buf[:i], self.buf[i + 2:]
                return line
            self._more(deadline)

    def _take(self, n, deadline):
        while len(self.buf) < n:
            self._more(deadline)
        data, self.buf = self.buf[:n], self.buf[n:]
        return data

    def round_trip(self, request, deadline, timeout):
        """Sends request and reads the answer before deadline: (status,
        the header (bytes that may run on into the body:
        _ratelimit_fields reads them), body, whether to keep the
        connection)."""
        if timeout != self.timeout:
            self._set_timeout(timeout)
        try:
            self.sock.sendall(request)
            data = self.sock.recv(65536)
        except (ConnectionResetError, BrokenPipeError) as e:
            raise _Stale(e) from e
        except BlockingIOError as e:
            raise socket.timeout("timed out") from e
        if not data:
            raise _Stale("the service closed the connection")
        end = data.find(b"\r\n\r\n")
        if end < 0:
            self.buf = data
            while end < 0:
                if len(self.buf) > 65536:
                    raise ValueError("an answer header of more than 64 KiB")
                self._more(deadline)
                end = self.buf.find(b"\r\n\r\n")
            data = self.buf
        # The header is read in data, not in a copy of it.
        self.buf = data[end + 4:]
        # The usual status line, "HTTP/1.1 200 OK", is read in place: its
        # split (below, for any other) was a tenth of the client's own
        # work, and gives the same code for it.
        if data.startswith(b"HTTP/1.1 ") and data[9:12].isdigit() and data[12] in b" \r":
            status = int(data[9:12])
        else:
            parts = _status_line(data)
            if len(parts) < 2 or not parts[0].startswith(b"HTTP/1.") or not parts[1].isdigit():
                raise ValueError(f"answered {data[:100]!r}, not HTTP")
            status = int(parts[1])
        # One search finds the fields the connection reads (a loop over
        # every line was the most of its own cost); the last of each
        # wins. The RateLimit fields are left to the Decision: data,
        # bytes, is its own.
        length = None
        chunked, keep = False, True
        for name, value in _HEAD_FIELDS.findall(data, 0, end):
            name = name.lower()
            if name == b"content-length":
                length = value
            elif name == b"transfer-encoding":
                chunked = value.strip().lower() == b"chunked"
            else:
                keep = value.strip().lower() != b"close"
        if not chunked and length is not None and len(self.buf) == int(length) <= MAX_ANSWER:
            body, self.buf = self.buf, b""  # the whole answer came in one read
            return status, data, body, keep
        if chunked:
            body = b""
            while True:
                size = int(self._line(deadline).split(b";")[0], 16)
                if size == 0:
                    while self._line(deadline):
                        pass
                    break
                if len(body) + size > MAX_ANSWER:
                    raise ValueError("an answer of more than 1 MiB")
                body += self._take(size, deadline)
                self._line(deadline)
        elif length is not None:
            length = int(length)
            if length > MAX_ANSWER or length < 0:
                raise ValueError("an answer of more than 1 MiB")
            body = self._take(length, deadline)
        elif status in (204, 304):
            body = b""
        else:  # to the end of the connection
            try:
                while True:
                    self._more(deadline)
            except ValueError as e:
                if "ended early" not in str(e):
                    raise
            body, keep = self.buf, False
        if self.buf:
            keep = False  # more than one answer: not ours to guess
        return status, data, body, keep


def _status_line(data):
    """The parts of the status line that starts data, an answer's header
    and more: its version, its code and, when there is one, its reason."""
    end = data.find(b"\r\n\r\n")
    i = data.find(b"\r\n", 0, end)
    return data[:end if i < 0 else i].split(None, 2)


# A field the connection reads: its name (RFC 9112 allows no space
# before the colon) and its value.
_HEAD_FIELDS = re.compile(rb"\r\n(content-length|transfer-encoding|connection):([^\r\n]*)", re.IGNORECASE)
_RATELIMIT = re.compile(rb"\r\n(ratelimit|ratelimit-policy):([^\r\n]*)", re.IGNORECASE)


def _ratelimit_fields(data) -> Tuple[Tuple[str, str], ...]:
    """The RateLimit fields, as Decision.headers has them, of the header
    that starts data (bytes): the last of each name wins."""
    end = data.find(b"\r\n\r\n")
    ratelimit = policy = None
    for name, value in _RATELIMIT.findall(data, 0, len(data) if end < 0 else end):
        if len(name) == 9:  # ratelimit, in any case
            ratelimit = value
        else:
            policy = value
    fields = ()
    if ratelimit is not None:
        fields = ((RATELIMIT_FIELDS[0], ratelimit.strip().decode("latin-1")),)
    if policy is not None:
        fields += ((RATELIMIT_FIELDS[1], policy.strip().decode("latin-1")),)
    return fields


class _Fields:
    """Decision.headers of a Decision the client made: found, when first
    asked for, in the answer's header the Decision keeps (finding them
    on every call was a tenth of the client's own work, for fields only
    a middleware copying them onto a response reads). Once found, or for
    a Decision made by its constructor, they are in the instance's
    __dict__, which comes first: this descriptor has no __set__."""

    def __get__(self, decision, cls=None):
        if decision is None:
            return ()  # the class's attribute: the field's default
        fields = _ratelimit_fields(decision.__dict__["_header"])
        decision.__dict__["headers"] = fields
        return fields


Decision.headers = _Fields()


def _num(a, name):
    v = a.get(name, 0)
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else 0.0


def _int(a, name):
    v = a.get(name, 0)
    return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else 0


def _decision(a, header, path) -> Decision:
    """The Decision of the service's answer a, whose header (bytes) starts
    header."""
    # Decision(...) runs a frozen dataclass's field-by-field __init__
    # and this its conversions, field by field: the most of the client's
    # own work once. An answer of the service's fields, of their types
    # (a float may come as an int), gives the Decision's attributes at
    # once instead; anything else takes the long way.
    d = _DECISION | a  # the defaults' dict copied whole, then a's; not a dict built key by key
    if (len(d) == 12 and d["error"] is None and type(d["allowed"]) is bool and type(d["rule"]) is str
            and type(d["limit"]) is int and type(d["policy"]) is str and type(d["remaining"]) is int
            and type(d["shadowed"]) is bool and type(d["guard"]) is str and type(d["duplicate"]) is bool
            and type(d["expires"]) is str):
        # A whole number of seconds comes as an int (retry_after is 0
        # when allowed): converted here, not by a call of _num.
        if type(d["reset_after"]) is not float:
            d["reset_after"] = float(d["reset_after"]) if type(d["reset_after"]) is int else _num(d, "reset_after")
        if type(d["retry_after"]) is not float:
            d["retry_after"] = float(d["retry_after"]) if type(d["retry_after"]) is int else _num(d, "retry_after")
        d["_header"] = header  # its headers found when asked: see _Fields
        decision = _new(Decision)
        _setattr(decision, "__dict__", d)
        return decision
    if not isinstance(a.get("allowed"), bool):
        raise Unavailable(f"sluice: {path} answered {str(a)[:200]!r}, not a decision")
    return Decision(
        allowed=a["allowed"], rule=str(a.get("rule", "")), limit=_int(a, "limit"),
        policy=str(a.get("policy", "")), remaining=_int(a, "remaining"),
        reset_after=_num(a, "reset_after"), retry_after=_num(a, "retry_after"),
        shadowed=bool(a.get("shadowed")), guard=str(a.get("guard", "")),
        duplicate=bool(a.get("duplicate")), expires=str(a.get("expires", "")), headers=_ratelimit_fields(header))


# A Decision's attributes in the order of its fields but headers, with
# the defaults of an answer's missing fields; "allowed" has none.
_DECISION = {"allowed": None, "rule": "", "limit": 0, "policy": "", "remaining": 0, "reset_after": 0.0,
             "retry_after": 0.0, "shadowed": False, "guard": "", "duplicate": False, "expires": "",
             "error": None}

_new, _setattr = object.__new__, object.__setattr__
