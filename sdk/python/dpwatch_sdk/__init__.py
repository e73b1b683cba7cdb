"""dpwatch-sdk: the user's side of dpwatch.

- serve a mechanism as a sampling endpoint (:class:`Endpoint`; ASGI, WSGI or a server of its own);
- adapters for OpenDP, diffprivlib and any ``f(database, n, rng)`` (:mod:`dpwatch_sdk.adapters`);
- a typed client of the REST API, sync and async (:class:`Client`, :class:`AsyncClient`);
- DP tests in pytest (:func:`dpwatch_sdk.testing.assert_dp`, with the ``testing`` extra);
- the endpoint's signing secret: :func:`generate_secret` makes one, :func:`validate_secret` checks one.

Nothing here imports the dpwatch service; the package's only dependency is ``httpx`` (the Standard
Webhooks signature is the standard library's HMAC; numpy is optional; ``pip install 'dpwatch-sdk[testing]'`` adds numpy and
scipy for ``assert_dp``).
"""

import typing

from .endpoint import Endpoint, Mechanism, RunningServer
from .mechanism import Claim, one_at_a_time
from .protocol import Output, generate_secret, validate_secret

if typing.TYPE_CHECKING:  # loaded lazily below, so that serving an endpoint never imports the client
    from .client import AsyncClient, Client

__version__ = "0.1.0"

__all__ = [
    "AsyncClient",
    "Claim",
    "Client",
    "Endpoint",
    "Mechanism",
    "Output",
    "RunningServer",
    "generate_secret",
    "one_at_a_time",
    "validate_secret",
]


def __getattr__(name: str):  # the client loads httpx only when used
    if name in ("Client", "AsyncClient"):
        from . import client

        return getattr(client, name)
    raise AttributeError(name)
