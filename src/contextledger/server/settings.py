"""Service settings: command-line options, then ``CONTEXTLEDGER_*`` environment variables,
then defaults.

Every worker process of ``contextledger serve --workers N`` builds its app from the
environment (:meth:`ServerSettings.from_env`), so the options are handed to the workers as
environment variables (:meth:`ServerSettings.to_env`).

Needs no optional package.
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

__all__ = ["DEFAULT_ANTHROPIC_UPSTREAM", "DEFAULT_MODEL_BUDGETS", "DEFAULT_OPENAI_UPSTREAM", "PROXY_MODES", "ServerSettings", "is_loopback"]

DEFAULT_OPENAI_UPSTREAM = "https://api.openai.com/v1"
"""Base URL of the OpenAI API, ``/v1`` included (as the OpenAI SDK's ``base_url``)."""

DEFAULT_ANTHROPIC_UPSTREAM = "https://api.anthropic.com"
"""Base URL of the Anthropic API, without ``/v1`` (as the Anthropic SDK's ``base_url``)."""

DEFAULT_MODEL_BUDGETS: tuple[tuple[str, int], ...] = (
    ("claude-", 64_000),
    ("gpt-", 32_000),
    ("o1", 32_000),
    ("o3", 32_000),
    ("o4", 32_000),
)
"""Token budget of a proxied request without ``x-contextledger-budget``, by model-name
prefix (first match; the policy's ``default_budget_tokens`` otherwise).  Agents declare
many tools (Claude Code: ≈ 15,000 tokens of schemas), which count against the budget."""

PROXY_MODES = ("assemble", "shadow")
"""``ServerSettings.proxy_mode`` values (:data:`contextledger.server.proxy.shadow.MODES`)."""


def is_loopback(host: str) -> bool:
    """Whether binding to ``host`` only accepts connections from this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _budgets(text: str) -> tuple[tuple[str, int], ...]:
    """Parse ``"claude-=64000,gpt-4o=32000"``.

    Raises:
        ValueError: an entry that is not ``PREFIX=TOKENS`` with a positive integer.
    """
    out: list[tuple[str, int]] = []
    for entry in filter(None, (e.strip() for e in text.split(","))):
        prefix, sep, value = entry.partition("=")
        if not sep or not value.strip().isdigit() or int(value) <= 0:
            raise ValueError(f"model budget {entry!r} is not PREFIX=TOKENS")
        out.append((prefix.strip(), int(value)))
    return tuple(out)


@dataclass(frozen=True, kw_only=True)
class ServerSettings:
    """What one service process needs.

    Attributes:
        db / home: the ledger (as ``--db`` / ``--home``; ``None``: the embedded default).
        host / port / workers: where uvicorn listens and how many processes serve.
        openai_upstream: base URL, ``/v1`` included (``CONTEXTLEDGER_OPENAI_UPSTREAM``).
        anthropic_upstream: base URL without ``/v1`` (``CONTEXTLEDGER_ANTHROPIC_UPSTREAM``).
        tenant: the tenant of keyless requests (loopback only, no key created yet).
        upstream_timeout_s: seconds to wait for the upstream (connect and each read).
        model_budgets: default budget by model prefix (``CONTEXTLEDGER_MODEL_BUDGETS``).
        telemetry: emit an OpenTelemetry span per assembly (``CONTEXTLEDGER_OTEL=1``,
            or any ``OTEL_EXPORTER_OTLP_ENDPOINT``).
        proxy_mode: ``"assemble"`` (send the assembled request) or ``"shadow"`` (send
            the client's own, record what the assembly would have sent:
            :mod:`contextledger.server.proxy.shadow`; ``CONTEXTLEDGER_PROXY_MODE``).
        stream_usage: add ``stream_options.include_usage`` to streamed OpenAI Chat
            requests that do not set it, so the upstream reports their usage
            (``CONTEXTLEDGER_STREAM_USAGE=1``; off: the client's request as sent).
    """

    db: str | None = None
    home: str | None = None
    host: str = "127.0.0.1"
    port: int = 8787
    workers: int = 1
    openai_upstream: str = DEFAULT_OPENAI_UPSTREAM
    anthropic_upstream: str = DEFAULT_ANTHROPIC_UPSTREAM
    tenant: str = "default"
    upstream_timeout_s: float = 600.0
    model_budgets: tuple[tuple[str, int], ...] = field(default=DEFAULT_MODEL_BUDGETS)
    telemetry: bool = False
    proxy_mode: str = "assemble"
    stream_usage: bool = False

    def __post_init__(self) -> None:
        if self.proxy_mode not in PROXY_MODES:
            raise ValueError(f"proxy mode must be one of {', '.join(PROXY_MODES)}, got {self.proxy_mode!r}")

    @property
    def loopback(self) -> bool:
        """Whether the service is bound to loopback only."""
        return is_loopback(self.host)

    def budget_for(self, model: str | None) -> int | None:
        """The default budget of a request for ``model`` (``None``: the policy's)."""
        for prefix, tokens in self.model_budgets:
            if model and model.startswith(prefix):
                return tokens
        return None

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: object) -> ServerSettings:
        """Settings from ``CONTEXTLEDGER_*`` variables, then ``overrides`` (``None``
        values are ignored).

        Raises:
            ValueError: a malformed number or model-budget list.
        """
        e = os.environ if env is None else env
        s = cls(
            db=e.get("CONTEXTLEDGER_DB") or None,
            home=e.get("CONTEXTLEDGER_HOME") or None,
            host=e.get("CONTEXTLEDGER_HOST", "127.0.0.1"),
            port=int(e.get("CONTEXTLEDGER_PORT", "8787")),
            workers=int(e.get("CONTEXTLEDGER_WORKERS", "1")),
            openai_upstream=(e.get("CONTEXTLEDGER_OPENAI_UPSTREAM") or DEFAULT_OPENAI_UPSTREAM).rstrip("/"),
            anthropic_upstream=(e.get("CONTEXTLEDGER_ANTHROPIC_UPSTREAM") or DEFAULT_ANTHROPIC_UPSTREAM).rstrip("/"),
            tenant=e.get("CONTEXTLEDGER_TENANT") or "default",
            upstream_timeout_s=float(e.get("CONTEXTLEDGER_UPSTREAM_TIMEOUT", "600")),
            model_budgets=_budgets(e["CONTEXTLEDGER_MODEL_BUDGETS"]) if e.get("CONTEXTLEDGER_MODEL_BUDGETS") else DEFAULT_MODEL_BUDGETS,
            telemetry=e.get("CONTEXTLEDGER_OTEL", "") not in ("", "0", "false") or bool(e.get("OTEL_EXPORTER_OTLP_ENDPOINT")),
            proxy_mode=(e.get("CONTEXTLEDGER_PROXY_MODE") or "assemble").strip().lower(),
            stream_usage=e.get("CONTEXTLEDGER_STREAM_USAGE", "") not in ("", "0", "false"),
        )
        given = {k: v for k, v in overrides.items() if v is not None}
        for k in ("openai_upstream", "anthropic_upstream"):
            if isinstance(given.get(k), str):
                given[k] = str(given[k]).rstrip("/")
        return replace(s, **given)  # type: ignore[arg-type]

    def to_env(self) -> dict[str, str]:
        """The environment that makes :meth:`from_env` return these settings."""
        env = {
            "CONTEXTLEDGER_HOST": self.host,
            "CONTEXTLEDGER_PORT": str(self.port),
            "CONTEXTLEDGER_WORKERS": str(self.workers),
            "CONTEXTLEDGER_OPENAI_UPSTREAM": self.openai_upstream,
            "CONTEXTLEDGER_ANTHROPIC_UPSTREAM": self.anthropic_upstream,
            "CONTEXTLEDGER_TENANT": self.tenant,
            "CONTEXTLEDGER_UPSTREAM_TIMEOUT": str(self.upstream_timeout_s),
            "CONTEXTLEDGER_MODEL_BUDGETS": ",".join(f"{p}={n}" for p, n in self.model_budgets),
            "CONTEXTLEDGER_OTEL": "1" if self.telemetry else "0",
            "CONTEXTLEDGER_PROXY_MODE": self.proxy_mode,
            "CONTEXTLEDGER_STREAM_USAGE": "1" if self.stream_usage else "0",
        }
        if self.db:
            env["CONTEXTLEDGER_DB"] = self.db
        if self.home:
            env["CONTEXTLEDGER_HOME"] = self.home
        return env
