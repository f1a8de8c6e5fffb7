"""A LangChain v1 agent with contextledger: the agent's state keeps every message, each
model call gets the assembled context.

Run ``python examples/langchain_agent.py`` (``pip install 'contextledger[langchain]'``).  It
needs no network: ``ScriptedChatModel`` answers with scripted tool calls.  With a real
model, pass ``ChatOpenAI(...)`` or ``"openai:gpt-4o"`` to ``create_agent``.
"""

from __future__ import annotations

import sys
import tempfile

from contextledger.extras import missing_extra

try:
    from langchain.agents import create_agent
    from langchain_core.messages import AIMessage
    from langchain_core.tools import tool

    from contextledger import Ledger
    from contextledger.adapters.langchain import LedgerMiddleware, ScriptedChatModel
except ModuleNotFoundError as exc:  # an optional extra is not installed
    sys.exit(missing_extra(exc, "examples/langchain_agent.py"))


@tool
def read_file(path: str) -> str:
    """Read a file of the repository."""
    return "def parse(line):\n    return line.split(',')  # splits quoted commas too\n"


model = ScriptedChatModel([
    AIMessage(content="", tool_calls=[{"id": "call_1", "name": "read_file", "args": {"path": "src/csv.py"}}]),
    AIMessage(content="parse() splits on every comma; use the csv module."),
])

with tempfile.TemporaryDirectory() as home:
    ledger = Ledger.open(home=home)
    middleware = LedgerMiddleware(ledger, budget_tokens=4000)
    agent = create_agent(model, [read_file], middleware=[middleware], system_prompt="You are a careful coding agent.")
    state = agent.invoke({"messages": [{"role": "user", "content": "Why does parsing fail? Never change the file format."}]})
    print(state["messages"][-1].text)
    explanation = ledger.explain(middleware.assembly_ids[-1])
    print(f"{len(state['messages'])} messages in the state; last request {explanation['assembled_tokens']} tokens "
          f"(replay {explanation['replay_tokens']})")
    ledger.close()
