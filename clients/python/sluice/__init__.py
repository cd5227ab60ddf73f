"""A client of sluice serve's HTTP JSON API, with the standard library
only: :class:`Client` (check, peek, insert, reserve/commit/refund,
report, reset, login_begin/login_settle, acquire/release), and
integrations for Django (:mod:`sluice.django`) and Flask
(:mod:`sluice.flask`), which import their framework only when used."""

from .client import (Client, Decision, InvalidRequest, Lease, LoginAttempt, Settled, SluiceError,
                     Unavailable, normalize_key)
from .web import ConfigurationError, Limit

__all__ = ["Client", "Decision", "InvalidRequest", "Lease", "LoginAttempt", "Settled", "SluiceError",
           "Unavailable", "ConfigurationError", "Limit", "normalize_key"]
__version__ = "0.1.0"
