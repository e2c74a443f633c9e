"""The load generator's client: an asyncio streaming client for OpenAI-compatible completions and chat.

Its parts live apart, and this module gathers what callers use:

* :mod:`worthit.loadgen.records`: what a level sends (:class:`RequestSpec`) and records (:class:`RequestRecord`,
  :class:`RunResult`), and :class:`Refused`, which ends a level the server refuses (HTTP 401/403);
* :mod:`worthit.loadgen.transports`: how a request reaches the server (:class:`ClientConfig`; a small HTTP/1.1
  client of its own for ``http://``, aiohttp for ``https://``);
* :mod:`worthit.loadgen.sse`: how a streamed response is read and its token chunks timed;
* :mod:`worthit.loadgen.scheduling`: when requests start (:func:`closed_loop`, :func:`open_loop`,
  :func:`sessions_loop`, and :func:`run` over worker processes).
"""

from worthit.loadgen.records import REFUSED_STATUSES, Progress, Refused, RequestRecord, RequestSpec, RunResult
from worthit.loadgen.scheduling import arrival_gaps, closed_loop, open_loop, run, sessions_loop
from worthit.loadgen.transports import ENDPOINTS, ClientConfig, make_session, send

__all__ = [
    "ENDPOINTS",
    "REFUSED_STATUSES",
    "ClientConfig",
    "Progress",
    "Refused",
    "RequestRecord",
    "RequestSpec",
    "RunResult",
    "arrival_gaps",
    "closed_loop",
    "make_session",
    "open_loop",
    "run",
    "send",
    "sessions_loop",
]
