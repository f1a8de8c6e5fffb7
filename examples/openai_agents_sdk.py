"""The OpenAI Agents SDK with contextledger: the session keeps every item, each model call
gets the assembled context.

Run ``python examples/openai_agents_sdk.py`` (``pip install 'contextledger[agents]'``).  It
needs no network: the SDK's own ``ScriptedModel`` stands in for the model.  With a real
model, drop ``model=`` from the ``Agent``.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile

from contextledger.extras import missing_extra

try:
    from agents import Agent, RunConfig, Runner, function_tool
    from agents.testing import ScriptedModel, assistant_message, function_call

    from contextledger import Ledger
    from contextledger.adapters.openai_agents import LedgerSession, ledger_input_filter
except ModuleNotFoundError as exc:  # an optional extra is not installed
    sys.exit(missing_extra(exc, "examples/openai_agents_sdk.py"))


@function_tool
def run_tests(path: str) -> str:
    """Run the test suite under a path."""
    return "collected 40 items\n" + "PASSED\n" * 39 + "FAILED tests/test_csv.py::test_quoted - AssertionError: 'a,\"b,c\"' split in 3\n"


model = ScriptedModel([
    [function_call("run_tests", {"path": "tests/"}, call_id="call_1")],
    [assistant_message("tests/test_csv.py::test_quoted fails: quoted commas are split.")],
])
agent = Agent(name="coder", instructions="You are a careful coding agent.", model=model, tools=[run_tests])

with tempfile.TemporaryDirectory() as home:
    ledger = Ledger.open(home=home)
    session = LedgerSession(ledger)  # every item recorded as it is added; nothing ever deleted
    assemble = ledger_input_filter(ledger, budget_tokens=4000, session=session)  # runs before each model call
    config = RunConfig(call_model_input_filter=assemble, tracing_disabled=True)
    result = asyncio.run(Runner.run(agent, "Why is CI red? Do not touch the public API.", session=session, run_config=config))
    print(result.final_output)
    explanation = ledger.explain(assemble.assembly_ids[-1])
    print(f"{len(asyncio.run(session.get_items()))} items in the session; last request {explanation['assembled_tokens']} tokens "
          f"(replay {explanation['replay_tokens']})")
    ledger.close()
