"""The provider-compatible proxy: ``POST /v1/chat/completions``, ``/v1/responses`` and
``/v1/messages`` accept exactly what the provider accepts (see :mod:`.pipeline`)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response

from contextledger.server.proxy.anthropic import AnthropicDialect
from contextledger.server.proxy.openai_chat import OpenAIChatDialect
from contextledger.server.proxy.openai_responses import OpenAIResponsesDialect
from contextledger.server.proxy.pipeline import forward_other, handle
from contextledger.server.proxy.probes import count_tokens

__all__ = ["router"]

router = APIRouter(prefix="/v1", tags=["proxy"])
_CHAT = OpenAIChatDialect()
_MESSAGES = AnthropicDialect()
_RESPONSES = OpenAIResponsesDialect()
_BODY = {"requestBody": {"content": {"application/json": {"schema": {"type": "object"}}}, "required": True}}


@router.post("/chat/completions", summary="OpenAI Chat Completions, with assembled context", openapi_extra=_BODY)
async def chat_completions(request: Request) -> Response:
    return await handle(request, _CHAT)


@router.post("/messages", summary="Anthropic Messages, with assembled context", openapi_extra=_BODY)
async def messages(request: Request) -> Response:
    return await handle(request, _MESSAGES)


@router.post("/responses", summary="OpenAI Responses, with assembled context", openapi_extra=_BODY)
async def responses(request: Request) -> Response:
    return await handle(request, _RESPONSES)


@router.post("/messages/count_tokens", summary="Anthropic token count of the assembled request", openapi_extra=_BODY)
async def count_message_tokens(request: Request) -> Response:
    """The upstream's count of the request as the proxy will send it (:mod:`.probes`)."""
    return await count_tokens(request, _MESSAGES, "messages/count_tokens")


@router.api_route("/{path:path}", methods=["GET", "POST", "PUT", "PATCH", "DELETE"], include_in_schema=False)
async def other(path: str, request: Request) -> Response:
    """Any other provider route (model lists …), forwarded untouched: to
    the Anthropic upstream when the request carries ``anthropic-version`` or ``x-api-key``,
    else to the OpenAI upstream."""
    anthropic = "anthropic-version" in request.headers or "x-api-key" in request.headers
    return await forward_other(request, path, _MESSAGES if anthropic else _CHAT)
