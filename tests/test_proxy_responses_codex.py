"""What Codex-shaped Responses requests need from the proxy, with bodies written from
codex-rs's item types (``ResponseItem``: custom tool calls, local shell calls, web
search calls, compaction, reasoning) and the headers Codex CLI 0.171 sends
(``session-id`` / ``thread-id``, ``prompt_cache_key``): conversation identity per session,
every tool kind in its own item shape, the verbatim system items and tools inside the
budget, and injected preambles never taken for the task."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from contextledger.ledger import Ledger
from contextledger.providers.counting import count_openai_responses_tokens
from contextledger.providers.openai_responses import native_tool_items
from contextledger.providers.registry import validate_payload
from contextledger.providers.validate_responses import validate_openai_responses
from contextledger.server.app import create_app
from contextledger.server.proxy.openai_responses import OpenAIResponsesDialect
from contextledger.server.scripted import Plan, ScriptedUpstream
from contextledger.server.settings import ServerSettings
from service_support import serve

DEV = {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "You are a coding agent working in the user's repository."}]}
ENV = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "<environment_context>\n  <cwd>/work/app</cwd>\n  <shell>bash</shell>\n</environment_context>"}]}
APPLY_PATCH = {"type": "custom", "name": "apply_patch", "description": "Edit files with a patch.", "format": {"type": "grammar", "syntax": "lark", "definition": "start: begin_patch hunk+ end_patch\n" * 40}}
EXEC = {"type": "function", "name": "exec_command", "description": "Run a command.", "strict": False,
        "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}, "workdir": {"type": "string"}}, "required": ["cmd"]}}
PATCH = "*** Begin Patch\n*** Update File: app.py\n@@\n-x = 1\n+x = 2\n*** End Patch\n"


def _user(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def _script(kind: str, body: dict[str, Any]) -> Plan:
    return Plan(text="Done.")


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, ScriptedUpstream, Ledger]]:
    ledger = Ledger.open(home=tmp_path_factory.mktemp("svc"))
    upstream = ScriptedUpstream(_script)
    with serve(upstream.app) as up, serve(create_app(ServerSettings(openai_upstream=f"{up}/v1"), ledger=ledger)) as proxy:
        yield proxy, upstream, ledger
    ledger.close()


def _post(proxy: str, body: dict[str, Any], headers: dict[str, str]) -> httpx.Response:
    response = httpx.post(f"{proxy}/v1/responses", json=body, headers={"authorization": "Bearer sk-test", **headers}, timeout=60)
    assert response.status_code == 200 and "x-contextledger-passthrough" not in response.headers
    return response


# -- conversation identity --------------------------------------------------------------------
@pytest.mark.parametrize(
    ("headers", "body", "key"),
    [
        ({"Session-Id": "s-1", "thread-id": "t-1"}, {"prompt_cache_key": "p-1"}, "s-1"),
        ({"thread-id": "t-1"}, {"prompt_cache_key": "p-1"}, "t-1"),
        ({"session_id": "s-2", "conversation_id": "c-2"}, {}, "s-2"),
        ({"conversation_id": "c-3"}, {}, "c-3"),
        ({"session-id": "  "}, {"prompt_cache_key": "p-4"}, "p-4"),
        ({}, {"prompt_cache_key": ""}, None),
        ({"x-other": "v"}, {}, None),
    ],
)
def test_session_key_prefers_the_session_headers_then_the_cache_key(headers: dict[str, str], body: dict[str, Any], key: str | None) -> None:
    assert OpenAIResponsesDialect().session_key(headers, body) == key


def test_two_sessions_with_one_start_stay_two_conversations(stack: tuple[str, ScriptedUpstream, Ledger]) -> None:
    proxy, upstream, _ = stack
    prompt = "Rename the config loader. Keep the public API unchanged."
    body = {"model": "gpt-5.5", "input": [DEV, ENV, _user(prompt)], "tools": [EXEC, APPLY_PATCH], "stream": False}
    first = _post(proxy, body, {"session-id": "0195-aaaa"})
    again = _post(proxy, body, {"session-id": "0195-aaaa"})
    other = _post(proxy, body, {"session-id": "0195-bbbb"})
    conv = [r.headers["x-contextledger-conversation"] for r in (first, again, other)]
    assert conv[0] == conv[1] and conv[2] != conv[0]
    # the other session's request holds nothing of the first session's answers
    assert [i.get("role") for i in upstream.received[-1].body["input"]] == ["developer", "user", "user"]


# -- every tool kind in its own shape ---------------------------------------------------------------
def _codex_history() -> list[dict[str, Any]]:
    return [
        DEV, ENV, _user("Bump x and list the files."),
        {"type": "compaction", "encrypted_content": "gAAAAB-compacted-history=="},
        {"type": "reasoning", "summary": [{"type": "summary_text", "text": "Patch first."}], "encrypted_content": "gAAAAB-old-reasoning=="},
        {"type": "custom_tool_call", "status": "completed", "call_id": "call_patch", "name": "apply_patch", "input": PATCH},
        {"type": "custom_tool_call_output", "call_id": "call_patch", "output": "Success. Updated the following files:\nM app.py\n"},
        {"type": "local_shell_call", "call_id": "call_ls", "status": "completed", "action": {"type": "exec", "command": ["ls", "-1"], "working_directory": "/work/app", "timeout_ms": None, "env": None, "user": None}},
        {"type": "function_call_output", "call_id": "call_ls", "output": "app.py\ntest_app.py"},
        {"type": "web_search_call", "status": "completed", "action": {"type": "search", "query": "python packaging"}},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "x is 2 now."}]},
        _user("Thanks, now run the tests."),
    ]


def test_every_tool_kind_goes_upstream_in_its_own_shape(stack: tuple[str, ScriptedUpstream, Ledger]) -> None:
    proxy, upstream, _ = stack
    tools = [EXEC, APPLY_PATCH, {"type": "local_shell"}, {"type": "web_search"}]
    _post(proxy, {"model": "gpt-5.5", "input": _codex_history(), "tools": tools, "stream": False}, {"session-id": "kinds"})
    sent = upstream.received[-1]
    assert sent.problems == []
    assert sent.body["tools"] == tools
    # the ledger's own notes (working set) aside, wherever the assembly puts them
    history = [i for i in sent.body["input"] if not str(i.get("content", "")).startswith("[contextledger:")]
    assert history == [
        DEV,
        {"type": "compaction", "encrypted_content": "gAAAAB-compacted-history=="},
        {"type": "message", "role": "user", "content": ENV["content"][0]["text"]},
        {"type": "message", "role": "user", "content": "Bump x and list the files."},
        {"type": "custom_tool_call", "call_id": "call_patch", "name": "apply_patch", "input": PATCH},
        {"type": "custom_tool_call_output", "call_id": "call_patch", "output": "Success. Updated the following files:\nM app.py\n"},
        {"type": "local_shell_call", "call_id": "call_ls", "status": "completed",
         "action": {"type": "exec", "command": ["ls", "-1"], "working_directory": "/work/app", "timeout_ms": None, "env": None, "user": None}},
        {"type": "function_call_output", "call_id": "call_ls", "output": "app.py\ntest_app.py"},
        {"type": "message", "role": "assistant", "content": "x is 2 now."},
        {"type": "web_search_call", "status": "completed", "action": {"type": "search", "query": "python packaging"}},
        {"type": "message", "role": "user", "content": "Thanks, now run the tests."},
    ]


def test_undeclared_custom_tool_stays_a_declared_function() -> None:
    items = [{"type": "function_call", "call_id": "c1", "name": "apply_patch", "arguments": json.dumps({"input": PATCH})},
             {"type": "function_call_output", "call_id": "c1", "output": "ok"}]
    assert native_tool_items(items, [EXEC]) is items
    assert native_tool_items(items, [APPLY_PATCH]) == [
        {"type": "custom_tool_call", "call_id": "c1", "name": "apply_patch", "input": PATCH},
        {"type": "custom_tool_call_output", "call_id": "c1", "output": "ok"},
    ]
    # a local shell call whose arguments are not an exec action stays a function call
    odd = [{"type": "function_call", "call_id": "c2", "name": "local_shell", "arguments": "{}"}]
    assert native_tool_items(odd, [{"type": "local_shell"}]) == odd


@pytest.mark.parametrize(
    ("items", "problems"),
    [
        ([{"type": "function_call", "call_id": "c1", "name": "apply_patch", "arguments": "{}"}, {"type": "function_call_output", "call_id": "c1", "output": "ok"}],
         ["input[0].name: tool 'apply_patch' is not declared in tools"]),
        ([{"type": "custom_tool_call", "call_id": "c1", "name": "apply_patch", "input": PATCH}, {"type": "function_call_output", "call_id": "c1", "output": "ok"}],
         ["input[1].call_id: 'c1' answers no function_call before it", "input[0]: no custom_tool_call_output answers call 'c1'"]),
        ([{"type": "custom_tool_call", "call_id": "c1", "name": "exec_command", "input": 3}, {"type": "custom_tool_call_output", "call_id": "c1", "output": "ok"}],
         ["input[0].name: custom tool 'exec_command' is not declared in tools", "input[0].input: must be a string"]),
        ([{"type": "custom_tool_call", "call_id": "c1", "name": "apply_patch", "input": PATCH}, {"type": "custom_tool_call_output", "call_id": "c1", "output": "ok"}], []),
        ([{"type": "local_shell_call", "call_id": "s1", "status": "completed", "action": {"type": "exec", "command": ["ls"]}}, {"type": "function_call_output", "call_id": "s1", "output": "a"}], []),
        ([{"type": "local_shell_call", "call_id": "s1", "status": "completed", "action": {"type": "exec", "command": ["ls"]}}, {"type": "local_shell_call_output", "id": "s1", "output": "a"}], []),
        ([{"type": "local_shell_call", "call_id": "s1", "status": "done", "action": {"type": "exec", "command": "ls"}}],
         ["input[0].action: must be an exec action with a command list of strings", "input[0].status: must be in_progress, completed or incomplete",
          "input[0]: no local_shell_call_output answers call 's1'"]),
    ],
)
def test_validator_pairs_each_output_with_a_call_of_its_kind(items: list[dict[str, Any]], problems: list[str]) -> None:
    assert validate_openai_responses({"input": items, "tools": [EXEC, APPLY_PATCH]}) == problems


# -- the budget covers what is sent verbatim ----------------------------------------------------------
def _long_loop(n: int, start: int = 0) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    for k in range(start, start + n):
        items.append({"type": "function_call", "call_id": f"call_{k}", "name": "exec_command", "arguments": json.dumps({"cmd": f"cat -n src/mod_{k}.py"})})
        items.append({"type": "function_call_output", "call_id": f"call_{k}", "output": "\n".join(f"{i:6}\tvalue_{k}_{i} = compute({i}, {k})" for i in range(60))})
    return items


def test_upstream_body_stays_within_the_budget_with_verbatim_system_items_and_tools(stack: tuple[str, ScriptedUpstream, Ledger]) -> None:
    proxy, upstream, ledger = stack
    developer = {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "Follow the repository conventions. " * 300}]}
    # a free-form tool's grammar is sent as declared; the assembly counts a one-argument schema
    grammar = {**APPLY_PATCH, "format": {**APPLY_PATCH["format"], "definition": "hunk: add_hunk | delete_hunk | update_hunk\n" * 200}}
    body = {"model": "gpt-5.5", "input": [developer, ENV, _user("Audit the modules. Never push to main."), *_long_loop(12)],
            "tools": [EXEC, grammar, {"type": "web_search"}], "stream": False}
    budget = 6000
    whole = count_openai_responses_tokens({k: body[k] for k in ("input", "tools")})
    assert whole > 2 * budget  # the history must be reduced
    parsed = OpenAIResponsesDialect().parse(body)
    reserved = OpenAIResponsesDialect().reserved_tokens(body, parsed)
    assert reserved > 1500
    response = _post(proxy, body, {"session-id": "budget", "x-contextledger-budget": str(budget)})
    sent = upstream.received[-1].body
    assert upstream.received[-1].problems == []
    assert count_openai_responses_tokens({k: sent[k] for k in ("instructions", "input", "tools") if k in sent}) <= budget
    assert sent["input"][0] == developer and sent["tools"] == body["tools"]
    explained = ledger.explain(response.headers["x-contextledger-assembly-id"])
    assert json.dumps(explained).count(f'"budget_tokens": {budget - reserved}') >= 1


def test_reserved_tokens_are_what_the_assembly_does_not_count() -> None:
    dialect = OpenAIResponsesDialect()
    plain = {"model": "m", "instructions": "Be brief.", "input": [_user("hi")], "tools": [EXEC]}
    # the assembly counts the instructions and a function tool exactly as they are sent
    assert dialect.reserved_tokens(plain, dialect.parse(plain)) == 0
    custom = {**plain, "tools": [EXEC, APPLY_PATCH, {"type": "web_search"}]}
    grammar = count_openai_responses_tokens({"tools": [EXEC, APPLY_PATCH, {"type": "web_search"}]}) - count_openai_responses_tokens(
        {"tools": [EXEC, {"type": "function", **dialect.parse(custom).tools[1]["function"]}]})
    assert dialect.reserved_tokens(custom, dialect.parse(custom)) == grammar > 0


# -- injected preambles are not the task --------------------------------------------------------------
def test_the_task_statement_is_the_users_words_not_the_environment_block(stack: tuple[str, ScriptedUpstream, Ledger]) -> None:
    proxy, upstream, _ = stack
    task = "Migrate the settings module to TOML. Keep Python 3.9 support."
    # the task is neither the first user item (the environment block) nor the current one
    body = {"model": "gpt-5.5", "input": [DEV, ENV, _user(task), *_long_loop(8), _user("Go on with the remaining modules."), *_long_loop(8, 8)],
            "tools": [EXEC], "stream": False}
    _post(proxy, body, {"session-id": "task", "x-contextledger-budget": "600"})
    sent = upstream.received[-1].body["input"]
    texts = [i["content"] for i in sent if i.get("role") == "user" and isinstance(i.get("content"), str)]
    assert task in texts


def test_a_system_prompt_over_the_budget_is_sent_once(stack: tuple[str, ScriptedUpstream, Ledger]) -> None:
    proxy, upstream, _ = stack
    text = "Work in small steps and explain each change before making it. " * 400
    developer = {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": text}]}
    task = "Tidy the imports. Never touch vendored code."
    body = {"model": "gpt-5.5", "input": [developer, ENV, _user(task)], "tools": [EXEC], "stream": False}
    _post(proxy, body, {"session-id": "over", "x-contextledger-budget": "2000"})
    sent = upstream.received[-1].body
    # the assembly cut the system prompt to fit; the client's own goes upstream whole, once
    assert sent["input"][0] == developer
    assert "Work in small steps" not in sent.get("instructions", "")
    assert sent.get("instructions") == "Constraints stated by the user (verbatim, still in force):\n- Never touch vendored code."
    assert [i["content"] for i in sent["input"][1:]] == [task]


# -- other payload formats ----------------------------------------------------------------------------
def _patch_calls(provider: str, payload: dict[str, Any]) -> list[Any]:
    if provider == "openai-chat":
        return [json.loads(c["function"]["arguments"]) for m in payload["messages"] for c in m.get("tool_calls") or [] if c["function"]["name"] == "apply_patch"]
    return [b["input"] for m in payload["messages"] if isinstance(m["content"], list) for b in m["content"] if b.get("type") == "tool_use" and b["name"] == "apply_patch"]


@pytest.mark.parametrize("provider", ["openai-chat", "anthropic"])
def test_a_custom_call_renders_as_a_function_call_with_its_input_elsewhere(tmp_path: Path, provider: str) -> None:
    body = {"model": "gpt-5.5", "input": _codex_history()[:7], "tools": [EXEC, APPLY_PATCH]}
    path = tmp_path / "codex-request.json"
    path.write_text(json.dumps(body), encoding="utf-8")
    ledger = Ledger.open(home=tmp_path / "home")
    try:
        imported = ledger.import_file(path, format="openai-responses")
        payload = ledger.assemble(imported.conversation_id, provider=provider, budget_tokens=20000).payload
    finally:
        ledger.close()
    assert validate_payload(provider, payload) == []
    assert _patch_calls(provider, payload) == [{"input": PATCH}]


# -- the continued turn ------------------------------------------------------------------------------
def test_the_continued_turn_keeps_its_encrypted_reasoning_beside_the_ledgers_notes(stack: tuple[str, ScriptedUpstream, Ledger]) -> None:
    proxy, upstream, _ = stack
    turn = [
        {"type": "reasoning", "id": "rs_turn", "summary": [{"type": "summary_text", "text": "Read it, then patch."}], "encrypted_content": "gAAAAB-turn-reasoning=="},
        {"type": "function_call", "call_id": "call_read", "name": "exec_command", "arguments": json.dumps({"cmd": "cat -n app.py"})},
        {"type": "function_call_output", "call_id": "call_read", "output": "     1\tx = 1\n"},
        {"type": "reasoning", "id": "rs_patch", "summary": [], "encrypted_content": "gAAAAB-patch-reasoning=="},
        {"type": "custom_tool_call", "call_id": "call_edit", "name": "apply_patch", "input": PATCH},
        {"type": "custom_tool_call_output", "call_id": "call_edit", "output": "Success. Updated the following files:\nM app.py\n"},
    ]
    body = {"model": "gpt-5.5", "input": [DEV, ENV, _user("Set x to 2 in app.py."), *turn], "tools": [EXEC, APPLY_PATCH], "stream": False,
            "include": ["reasoning.encrypted_content"], "store": False}
    _post(proxy, body, {"session-id": "turn"})
    sent = upstream.received[-1]
    assert sent.problems == []
    items = sent.body["input"]
    start = items.index(turn[0])
    # the turn goes upstream exactly as the client sent it; the ledger's notes may follow it
    assert items[start:start + len(turn)] == turn
    assert all(str(i.get("content", "")).startswith("[contextledger:") for i in items[start + len(turn):])


def test_without_a_budget_header_the_reservation_comes_off_the_default(stack: tuple[str, ScriptedUpstream, Ledger]) -> None:
    proxy, _, ledger = stack
    body = {"model": "no-such-model", "input": [DEV, ENV, _user("Say which files changed.")], "tools": [EXEC, APPLY_PATCH], "stream": False}
    dialect = OpenAIResponsesDialect()
    reserved = dialect.reserved_tokens(body, dialect.parse(body))
    assert reserved > 0
    response = _post(proxy, body, {"session-id": "default-budget"})
    explained = ledger.explain(response.headers["x-contextledger-assembly-id"])
    default = ledger.policy.budget.default_budget_tokens
    assert f'"budget_tokens": {default - reserved}' in json.dumps(explained)
