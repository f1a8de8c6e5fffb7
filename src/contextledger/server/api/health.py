"""``GET /metrics``: the proxy's counters of this worker process in the Prometheus text
exposition format (version 0.0.4).

One counter family, ``contextledger_proxy_requests_total``, labelled by ``kind``
(:data:`~contextledger.server.proxy.events.KINDS`: requests forwarded untouched because
they could not be assembled, recognised side calls, assembled token counts, root probes)
and ``dialect``.  Every kind is exported, with ``dialect="all"`` carrying its total, so
a zero is visible before the first event.  ``contextledger_proxy_shadow_requests_total``
counts the requests forwarded as the client sent them in shadow mode (assembled and
recorded, not sent; never counted as passthroughs), and
``contextledger_proxy_upstream_tokens_total`` the tokens the upstream reported for the
answers, by ``type`` (:data:`~contextledger.server.proxy.events.TOKEN_KINDS`: input,
cache read, cache write, output) and ``dialect``, every type exported with
``dialect="all"``.
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import PlainTextResponse

from contextledger.server.proxy.events import TOKEN_KINDS, events_of

__all__ = ["METRICS_CONTENT_TYPE", "metrics_text", "router"]

METRICS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
router = APIRouter(tags=["service"])


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def metrics_text(request: Request) -> str:
    """The exposition text of the counters of ``request.app`` (lines end with ``\\n``)."""
    events = events_of(request.app)
    lines = [
        "# HELP contextledger_proxy_requests_total Proxy requests not assembled as a conversation turn, by kind and dialect.",
        "# TYPE contextledger_proxy_requests_total counter",
    ]
    lines += [f'contextledger_proxy_requests_total{{kind="{k}",dialect="all"}} {n}' for k, n in events.counts().items()]
    lines += [f'contextledger_proxy_requests_total{{kind="{k}",dialect="{_label(d)}"}} {n}' for k, d, n in events.by_dialect()]
    shadow = events.shadow_counts()
    lines += [
        "# HELP contextledger_proxy_shadow_requests_total Proxy requests forwarded as the client sent them in shadow mode (assembled and recorded, not sent).",
        "# TYPE contextledger_proxy_shadow_requests_total counter",
        f'contextledger_proxy_shadow_requests_total{{dialect="all"}} {sum(shadow.values())}',
        *(f'contextledger_proxy_shadow_requests_total{{dialect="{_label(d)}"}} {n}' for d, n in shadow.items()),
    ]
    tokens = events.token_counts()
    totals = dict.fromkeys(TOKEN_KINDS, 0)
    for kind, _dialect, n in tokens:
        totals[kind] += n
    lines += [
        "# HELP contextledger_proxy_upstream_tokens_total Tokens the upstream reported for the proxy's requests, by type (input includes cache reads and writes) and dialect.",
        "# TYPE contextledger_proxy_upstream_tokens_total counter",
        *(f'contextledger_proxy_upstream_tokens_total{{type="{k}",dialect="all"}} {n}' for k, n in totals.items()),
        *(f'contextledger_proxy_upstream_tokens_total{{type="{k}",dialect="{_label(d)}"}} {n}' for k, d, n in tokens),
    ]
    return "\n".join(lines) + "\n"


@router.get("/metrics", summary="The proxy's counters (Prometheus text format)", response_class=PlainTextResponse)
async def metrics(request: Request) -> PlainTextResponse:
    return PlainTextResponse(metrics_text(request), media_type=METRICS_CONTENT_TYPE)
