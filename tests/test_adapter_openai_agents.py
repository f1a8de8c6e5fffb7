"""The OpenAI Agents SDK adapter with a real ``Runner``, real function tools and the SDK's
own test double (``agents.testing.ScriptedModel``).

Every model input the filter builds is checked with the Responses validity checker and
counted against the budget; the session is compared item for item with the SDK's own
``SQLiteSession`` running the same script.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("agents")

from agents import Agent, RunConfig, Runner, SQLiteSession, function_tool
from agents.run_config import CallModelData, ModelInputData
from agents.testing import ScriptedModel, assistant_message, function_call

from contextledger.adapters.openai_agents import LedgerSession, as_item, ledger_input_filter
from contextledger.errors import InputError
from contextledger.ledger import Ledger
from contextledger.providers.registry import count_payload_tokens, validate_payload
from contextledger.records.enums import Role

P = "openai-responses"
BUDGET = 1500
CONSTRAINT = "Never restart the production database."


@function_tool
def read_log(name: str) -> str:
    """Read a service log file."""
    return f"== {name} ==\n" + "INFO request served in 12 ms\n" * 300 + f"ERROR {name}: disk full on /var/lib/pg\n"


def _script() -> list[Any]:
    steps: list[Any] = [[function_call("read_log", {"name": f"app{i}.log"}, call_id=f"call_{i}")] for i in range(5)]
    steps.append([assistant_message("The disk under /var/lib/pg is full.", item_id="msg_final")])
    return steps


def _agent(model: ScriptedModel) -> Agent[Any]:
    return Agent(name="ops", instructions="You are an operations assistant.", model=model, tools=[read_log])


def _run(agent: Agent[Any], session: Any, config: RunConfig | None = None, text: str = f"Why does the API fail? {CONSTRAINT}") -> Any:
    return asyncio.run(Runner.run(agent, text, session=session, run_config=config or RunConfig()))


def test_agent_with_ledger_session_and_filter(sqlite_ledger: Ledger, tmp_path: Path) -> None:
    model = ScriptedModel(_script())
    session = LedgerSession(sqlite_ledger)
    flt = ledger_input_filter(sqlite_ledger, budget_tokens=BUDGET, session=session)
    result = _run(_agent(model), session, RunConfig(call_model_input_filter=flt))
    assert result.final_output == "The disk under /var/lib/pg is full."
    assert len(model.calls) == 6 and len(flt.assembly_ids) == 6
    for k, call in enumerate(model.calls):
        payload = {"instructions": call.system_instructions, "input": call.input}
        assert validate_payload(P, payload) == [], k
        assert count_payload_tokens(P, payload) <= BUDGET, k
        assert call.system_instructions.startswith("You are an operations assistant.")
        # the user's constraint reaches the model verbatim: restated, or in the user's own message sent raw
        assert CONSTRAINT in call.system_instructions or CONSTRAINT in json.dumps(call.input)
        assert all("id" not in item for item in call.input)  # no item id is sent
        if k:
            newest = [i for i in call.input if i["type"] == "function_call_output"][-1]
            assert newest["call_id"] == f"call_{k - 1}"  # the newest tool result is there
            assert f"ERROR app{k - 1}.log: disk full on /var/lib/pg" in newest["output"]
    # the full history never shrinks: the SDK's own session holds the same items
    reference = SQLiteSession("ref", tmp_path / "ref.db")
    _run(_agent(ScriptedModel(_script())), reference)
    ours, theirs = asyncio.run(session.get_items()), asyncio.run(reference.get_items())
    assert len(ours) == 1 + 5 * 2 + 1
    assert ours == theirs
    assert asyncio.run(session.get_items(limit=2)) == theirs[-2:]
    # and the raw outputs are the ledger's artifacts, byte for byte
    arts = sqlite_ledger.store.artifacts(sqlite_ledger.scope(), session.conversation_id)
    assert sorted(a.call_id for a in arts) == [f"call_{i}" for i in range(5)]
    assert [sqlite_ledger.rehydrate(a.id).decode() for a in sorted(arts, key=lambda a: a.call_id)] == [i["output"] for i in theirs if i.get("type") == "function_call_output"]


def test_a_second_run_continues_the_conversation(sqlite_ledger: Ledger) -> None:
    session = LedgerSession(sqlite_ledger)
    flt = ledger_input_filter(sqlite_ledger, budget_tokens=BUDGET, session=session)
    _run(_agent(ScriptedModel(_script())), session, RunConfig(call_model_input_filter=flt))
    again = LedgerSession(sqlite_ledger, session.session_id)  # reopened by id
    model = ScriptedModel([[assistant_message("Free space on /var/lib/pg first.", item_id="msg_2")]])
    config = RunConfig(call_model_input_filter=ledger_input_filter(sqlite_ledger, budget_tokens=BUDGET, session=again))
    _run(_agent(model), again, config, text="What should I do?")
    (call,) = model.calls
    assert CONSTRAINT in call.system_instructions or CONSTRAINT in json.dumps(call.input)
    assert call.input[-1] == {"type": "message", "role": "user", "content": "What should I do?"}
    assert len(asyncio.run(again.get_items())) == 12 + 2


def test_filter_with_the_sdks_own_session_records_once(sqlite_ledger: Ledger, tmp_path: Path) -> None:
    """Without a LedgerSession the filter records what is new in each input: every item
    once, however often the history is passed."""
    model = ScriptedModel(_script())
    flt = ledger_input_filter(sqlite_ledger, budget_tokens=BUDGET)
    session = SQLiteSession("own", tmp_path / "own.db")
    _run(_agent(model), session, RunConfig(call_model_input_filter=flt))
    assert flt.conversation_id is not None
    msgs = sqlite_ledger.store.messages(sqlite_ledger.scope(), flt.conversation_id)
    assert [m.role for m in msgs] == [Role.USER] + [Role.ASSISTANT, Role.TOOL] * 5
    assert all(validate_payload(P, {"instructions": c.system_instructions, "input": c.input}) == [] for c in model.calls)
    assert len(asyncio.run(session.get_items())) == 12  # the user's session is untouched


def test_pop_and_clear_are_recorded_and_delete_nothing(sqlite_ledger: Ledger) -> None:
    session = LedgerSession(sqlite_ledger)
    items = [
        {"role": "user", "content": "first question"},
        {"id": "msg_a", "type": "message", "role": "assistant", "status": "completed", "content": [{"type": "output_text", "text": "first answer", "annotations": []}]},
        {"role": "user", "content": "second question"},
    ]
    asyncio.run(session.add_items(items))
    asyncio.run(session.add_items([items[0]]))  # the same text again is a new item
    assert asyncio.run(session.get_items()) == [*items, items[0]]
    assert asyncio.run(session.pop_item()) == items[0]
    assert asyncio.run(session.pop_item()) == items[2]
    assert asyncio.run(session.get_items()) == items[:2]
    asyncio.run(session.clear_session())
    assert asyncio.run(session.get_items()) == []
    assert asyncio.run(session.pop_item()) is None
    scope, conv = sqlite_ledger.scope(), session.conversation_id
    decisions = sqlite_ledger.store.decisions(scope, conversation_id=conv)
    assert [(d.decision, d.actor) for d in decisions] == [("session_pop", "openai-agents session")] * 2 + [("session_clear", "openai-agents session")]
    assert len(sqlite_ledger.store.messages(scope, conv)) == 4  # every record kept
    asyncio.run(session.add_items([{"role": "user", "content": "after clearing"}]))
    assert asyncio.run(session.get_items()) == [{"role": "user", "content": "after clearing"}]


def test_filter_refuses_server_managed_state(sqlite_ledger: Ledger) -> None:
    flt = ledger_input_filter(sqlite_ledger, budget_tokens=BUDGET)
    agent = _agent(ScriptedModel([]))
    delta = [{"type": "function_call_output", "call_id": "call_9", "output": "ok"}]
    with pytest.raises(InputError, match=r"^input\[0\]: function_call_output 'call_9' follows no function_call .* server-managed"):
        asyncio.run(flt(CallModelData(model_data=ModelInputData(input=delta, instructions=None), agent=agent, context=None)))
    with pytest.raises(InputError, match="leaves nothing after the agent's instructions"):
        tiny = ledger_input_filter(sqlite_ledger, budget_tokens=5)
        asyncio.run(tiny(CallModelData(model_data=ModelInputData(input=[{"role": "user", "content": "hi"}], instructions="a" * 200), agent=agent, context=None)))
    with pytest.raises(InputError, match="budget_tokens must be a positive"):
        ledger_input_filter(sqlite_ledger, budget_tokens=0)


def test_items_are_plain_dicts_and_bad_items_are_refused(sqlite_ledger: Ledger) -> None:
    from openai.types.responses import ResponseFunctionToolCall

    model_item = ResponseFunctionToolCall(type="function_call", call_id="c1", name="read_log", arguments='{"name": "x"}', id="fc_1")
    assert as_item(model_item) == {"type": "function_call", "call_id": "c1", "name": "read_log", "arguments": '{"name": "x"}', "id": "fc_1"}
    session = LedgerSession(sqlite_ledger)
    with pytest.raises(InputError, match=r"^items\[0\]: unknown role 'tool'$"):
        asyncio.run(session.add_items([{"role": "tool", "content": "x"}]))
    assert asyncio.run(session.get_items()) == []
    # an output answering no call is kept (as the importer keeps it), with a note
    orphan = {"type": "function_call_output", "call_id": "c9", "output": "late result"}
    asyncio.run(session.add_items([orphan]))
    assert asyncio.run(session.get_items()) == [orphan]
    assert session.log.notes == ["items[0]: tool output for call 'c9' answers no earlier call; kept as an observation"]
    (msg,) = sqlite_ledger.store.messages(sqlite_ledger.scope(), session.conversation_id)
    assert (msg.role, msg.kind.value, msg.parts[0].text) == (Role.USER, "observation", "late result")  # type: ignore[union-attr]
    assert json.loads(json.dumps(asyncio.run(session.get_items()))) == [orphan]  # JSON-ready
