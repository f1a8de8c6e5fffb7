"""The LangChain v1 adapter with a real ``create_agent`` agent, real tools and the shipped
tool-calling test double (:class:`~contextledger.adapters.langchain.ScriptedChatModel`).

Every model call's messages are converted with LangChain's own
``convert_to_openai_messages`` and checked with the Chat Completions validity checker and
token count; the agent's state is checked to keep every raw message.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

pytest.importorskip("langchain.agents")

from langchain.agents import create_agent
from langchain.agents.middleware import ModelRequest, ModelResponse
from langchain_core.messages import (
    AIMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    convert_to_openai_messages,
)
from langchain_core.tools import StructuredTool, ToolException, tool

from contextledger.adapters.langchain import (
    LedgerMiddleware,
    ScriptedChatModel,
    from_neutral,
    to_items,
)
from contextledger.errors import InputError
from contextledger.ledger import Ledger
from contextledger.providers.base import NeutralRequest, WireMessage
from contextledger.providers.registry import count_payload_tokens, validate_payload
from contextledger.records.enums import Role
from contextledger.records.parts import TextPart, ToolCallPart, ToolResultPart

BUDGET = 1200
CONSTRAINT = "Never restart the production database."


@tool
def read_log(name: str) -> str:
    """Read a service log file."""
    return f"== {name} ==\n" + "INFO request served in 12 ms\n" * 300 + f"ERROR {name}: disk full on /var/lib/pg\n"


def _restart(service: str) -> str:
    """Restart a service."""
    raise ToolException(f"{service}: permission denied")


restart = StructuredTool.from_function(_restart, name="restart", handle_tool_error=True)


def _script(n: int = 4) -> list[AIMessage]:
    calls = [AIMessage(content="", tool_calls=[{"id": f"call_{i}", "name": "read_log", "args": {"name": f"app{i}.log"}}]) for i in range(n)]
    return [*calls, AIMessage(content="The disk under /var/lib/pg is full.")]


def _check_calls(model: ScriptedChatModel, n: int) -> None:
    assert len(model.calls) == n
    for k, messages in enumerate(model.calls):
        payload = {"messages": convert_to_openai_messages(messages)}
        assert validate_payload("openai-chat", payload) == [], k
        assert count_payload_tokens("openai-chat", payload) <= BUDGET, k
        assert isinstance(messages[0], SystemMessage)
        assert messages[0].text.startswith("You are an operations assistant.")
        # the user's constraint reaches the model verbatim: restated, or in the user's own message sent raw
        assert CONSTRAINT in messages[0].text or any(isinstance(m, HumanMessage) and CONSTRAINT in m.text for m in messages)
        if k:
            newest = [m for m in messages if isinstance(m, ToolMessage)][-1]
            assert newest.tool_call_id == f"call_{k - 1}"  # the newest tool result is there
            assert f"ERROR app{k - 1}.log: disk full on /var/lib/pg" in newest.text


def test_create_agent_with_ledger_middleware(sqlite_ledger: Ledger) -> None:
    model = ScriptedChatModel(_script())
    mw = LedgerMiddleware(sqlite_ledger, budget_tokens=BUDGET)
    agent = create_agent(model, [read_log], middleware=[mw], system_prompt="You are an operations assistant.")
    result = agent.invoke({"messages": [{"role": "user", "content": f"Why does the API fail? {CONSTRAINT}"}]})
    _check_calls(model, 5)
    # the state keeps every message, raw
    state = result["messages"]
    assert [type(m).__name__ for m in state] == ["HumanMessage"] + ["AIMessage", "ToolMessage"] * 4 + ["AIMessage"]
    assert [m.text for m in state if isinstance(m, ToolMessage)] == [read_log.invoke({"name": f"app{i}.log"}) for i in range(4)]
    # the ledger holds each message once, the final answer included
    msgs = sqlite_ledger.store.messages(sqlite_ledger.scope(), mw.conversation_id or "")
    assert [m.role for m in msgs] == [Role.USER] + [Role.ASSISTANT, Role.TOOL] * 4 + [Role.ASSISTANT]
    assert len(mw.assembly_ids) == 5


def test_async_agent_and_a_failed_tool(sqlite_ledger: Ledger) -> None:
    script = [AIMessage(content="", tool_calls=[{"id": "call_r", "name": "restart", "args": {"service": "pg"}}]), *_script(2)]
    model = ScriptedChatModel(script)
    mw = LedgerMiddleware(sqlite_ledger, budget_tokens=BUDGET, provider="anthropic")
    agent = create_agent(model, [read_log, restart], middleware=[mw], system_prompt="You are an operations assistant.")
    result = asyncio.run(agent.ainvoke({"messages": [HumanMessage(content=f"Check the API. {CONSTRAINT}")]}))
    assert len(model.calls) == 4 and result["messages"][-1].text == "The disk under /var/lib/pg is full."
    failed = sqlite_ledger.store.artifacts(sqlite_ledger.scope(), mw.conversation_id or "", call_ids=["call_r"])
    assert [a.is_error for a in failed] == [True]  # ToolMessage status="error"
    later = model.calls[-1]
    assert any(isinstance(m, ToolMessage) and m.tool_call_id == "call_r" and m.status == "error" for m in later)


def test_unit_wrap_model_call_with_a_hand_built_request(sqlite_ledger: Ledger) -> None:
    """LangChain's own middleware tests build ``ModelRequest`` by hand and pass a stub
    handler; the same pattern checks that only the request is projected."""
    mw = LedgerMiddleware(sqlite_ledger, budget_tokens=400)
    history = [HumanMessage(content="hello", id="h1"), AIMessage(content="", tool_calls=[{"id": "c1", "name": "read_log", "args": {"name": "a"}}], id="a1"), ToolMessage(content="x" * 6000, tool_call_id="c1", id="t1")]
    request = ModelRequest(model=ScriptedChatModel([]), messages=list(history), system_message=None, tool_choice=None, tools=[], response_format=None, state={"messages": history}, runtime=None)  # type: ignore[arg-type]
    seen: list[ModelRequest] = []

    def handler(req: ModelRequest) -> ModelResponse:
        seen.append(req)
        return ModelResponse(result=[AIMessage(content="ok")])

    mw.wrap_model_call(request, handler)
    mw.wrap_model_call(request, handler)  # the same history again records nothing new
    assert request.messages == history  # the original request is untouched
    sent = seen[0].messages
    assert count_payload_tokens("openai-chat", {"messages": convert_to_openai_messages([*([seen[0].system_message] if seen[0].system_message else []), *sent])}) <= 400
    assert len(sent[-1].text) < 6000  # the 6,000-character output is shaped in the request
    assert len(sqlite_ledger.store.messages(sqlite_ledger.scope(), mw.conversation_id or "")) == 3


def test_message_mapping_round_trip() -> None:
    items, keys, failed = to_items([
        SystemMessage(content="sys", id="s"), HumanMessage(content="q", id="h"),
        AIMessage(content="thinking aloud", tool_calls=[{"id": "c1", "name": "t", "args": {"a": 1}}], id="a"),
        ToolMessage(content="boom", tool_call_id="c1", status="error", id="t"),
    ])
    assert items == [
        {"role": "system", "content": "sys"}, {"role": "user", "content": "q"},
        {"type": "message", "role": "assistant", "content": "thinking aloud"},
        {"type": "function_call", "call_id": "c1", "name": "t", "arguments": '{"a": 1}'},
        {"type": "function_call_output", "call_id": "c1", "output": "boom"},
    ]
    assert keys == ["lc:s", "lc:h", "lc:a:text", None, None] and failed == {"c1"}
    back = from_neutral(NeutralRequest(messages=(
        WireMessage(role="user", parts=(TextPart(text="q"),), name="alice"),
        WireMessage(role="assistant", parts=(TextPart(text="calling"), ToolCallPart(call_id="c1", tool_name="t", arguments_json="not json"))),
        WireMessage(role="tool", parts=(ToolResultPart(call_id="c1", text="boom", is_error=True),)),
    )))
    assert [(type(m).__name__, m.text) for m in back] == [("HumanMessage", "q"), ("AIMessage", "calling"), ("ToolMessage", "boom")]
    # a text turn and the calls recorded after it come back as one AIMessage
    split = from_neutral(NeutralRequest(messages=(
        WireMessage(role="assistant", parts=(TextPart(text="checking"),)),
        WireMessage(role="assistant", parts=(ToolCallPart(call_id="c2", tool_name="t", arguments_json="{}"),)),
        WireMessage(role="tool", parts=(ToolResultPart(call_id="c2", text="ok"),)),
    )))
    assert [(type(m).__name__, m.text, len(getattr(m, "tool_calls", []))) for m in split] == [("AIMessage", "checking", 1), ("ToolMessage", "ok", 0)]
    assert back[0].name == "alice"
    assert back[1].tool_calls == [{"id": "c1", "name": "t", "args": {"_raw": "not json"}, "type": "tool_call"}]
    assert back[2].status == "error"


def test_bad_budget_is_refused(sqlite_ledger: Ledger) -> None:
    with pytest.raises(InputError, match="budget_tokens must be a positive"):
        LedgerMiddleware(sqlite_ledger, budget_tokens=0)
    mw: Any = LedgerMiddleware(sqlite_ledger, budget_tokens=10)
    request = ModelRequest(model=ScriptedChatModel([]), messages=[HumanMessage(content="hi")], system_message=SystemMessage(content="s" * 400), tool_choice=None, tools=[], response_format=None, state={}, runtime=None)  # type: ignore[arg-type]
    with pytest.raises(InputError, match="leaves nothing after the agent's instructions"):
        mw.wrap_model_call(request, lambda r: ModelResponse(result=[]))
