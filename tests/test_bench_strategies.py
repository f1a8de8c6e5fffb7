"""Peer strategies of the benchmark run on the real libraries (LangChain, autogen-core,
OpenAI Agents SDK) and the local Anthropic ``clear_tool_uses`` port.

The expected outputs below are derived from each library's documented/verified semantics
(PEERS.md §§ 3-6), on a hand-built 14-message transcript whose three long tool outputs
dominate its size, and on a real tau-bench transcript.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage

from conftest import real_data_dir, require_real_data
from contextledger.bench.strategies import (
    AnthropicClearToolUsesStrategy,
    AutogenBufferedStrategy,
    AutogenHeadAndTailStrategy,
    AutogenTokenLimitedStrategy,
    LangChainClearToolUsesStrategy,
    LangChainSummarizationStrategy,
    LangChainTrimStrategy,
    LastNStrategy,
    OpenAISessionLimitStrategy,
    OpenAIToolOutputTrimmerStrategy,
    ReplayStrategy,
    Strategy,
    all_strategies,
)
from contextledger.bench.strategies.anthropic_clear_tool_uses import (
    DEFAULT_PLACEHOLDER,
    AppliedClear,
)
from contextledger.bench.strategies.base import (
    estimate_message_tokens,
    estimate_messages_tokens,
    largest_fitting,
)
from contextledger.bench.strategies.convert import (
    PARTS_MARKER,
    from_autogen,
    from_langchain,
    from_openai_items,
    to_autogen,
    to_langchain,
    to_openai_items,
)
from contextledger.bench.strategies.langchain_summarization import stub_summary
from contextledger.providers.base import NeutralRequest, ToolSchema, WireMessage
from contextledger.records.parts import (
    ImagePart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
)
from contextledger.tokens import get_tokenizer

REAL = real_data_dir()
SYSTEM = ("You are a careful build agent.",)
TOOLS = (ToolSchema(name="read_file"), ToolSchema(name="run_tests"), ToolSchema(name="search"))


def count_tokens(request: NeutralRequest) -> int:
    """Test counter: o200k over every text/arguments piece, plus 3 per message."""
    n = get_tokenizer().count
    total = sum(n(block) + 3 for block in request.system)
    for message in request.messages:
        total += 3
        for part in message.parts:
            if isinstance(part, TextPart | ThinkingPart):
                total += n(part.text)
            elif isinstance(part, ToolCallPart):
                total += n(part.tool_name) + n(part.arguments_json)
            elif isinstance(part, ToolResultPart):
                total += n(part.text or "")
    for tool in request.tools:
        total += n(tool.name) + n(tool.description) + n(json.dumps(tool.parameters))
    return total


def _long(tag: str, lines: int) -> str:
    return "\n".join(f"{tag} line {i}: value={i * 7} status=ok" for i in range(lines))


def user(text: str) -> WireMessage:
    return WireMessage(role="user", parts=(TextPart(text=text),))


def assistant(text: str | None, *calls: tuple[str, str, str]) -> WireMessage:
    parts: list[TextPart | ToolCallPart] = [TextPart(text=text)] if text else []
    parts += [ToolCallPart(call_id=c, tool_name=name, arguments_json=args) for c, name, args in calls]
    return WireMessage(role="assistant", parts=tuple(parts))


def result(call_id: str, text: str, *, error: bool = False) -> WireMessage:
    return WireMessage(role="tool", parts=(ToolResultPart(call_id=call_id, text=text, is_error=error),))


def transcript() -> NeutralRequest:
    """System, task, 2 parallel reads (long), a failed test run, a patch turn with a long
    search, a passing run, and a final user question: 14 messages, 1,749 test tokens."""
    messages = (
        user("Fix the failing test in parser.py."),  # 0
        assistant(
            "I will read both files.",
            ("c1", "read_file", '{"path": "parser.py"}'),
            ("c2", "read_file", '{"path": "test_parser.py"}'),
        ),  # 1
        result("c1", _long("parser.py", 40)),  # 2
        result("c2", _long("test_parser.py", 40)),  # 3
        assistant(None, ("c3", "run_tests", '{"target": "test_parser.py"}')),  # 4
        result("c3", "FAILED test_parse_empty: IndexError: list index out of range", error=True),  # 5
        assistant("The parser indexes an empty list."),  # 6
        user("Go ahead and patch it."),  # 7
        assistant(None, ("c4", "search", '{"query": "tokens[0]"}')),  # 8
        result("c4", _long("match", 40)),  # 9
        assistant(None, ("c5", "run_tests", '{"target": "test_parser.py"}')),  # 10
        result("c5", "2 passed"),  # 11
        assistant("All tests pass now."),  # 12
        user("What was the root cause?"),  # 13
    )
    return NeutralRequest(system=SYSTEM, messages=messages, tools=TOOLS)


def kept(out: NeutralRequest, replay: NeutralRequest) -> list[int | str]:
    """Index in ``replay`` of each output message, in order; a message not in ``replay`` is
    shown as ``"role:text"`` of its text parts."""
    shown: list[int | str] = []
    for message in out.messages:
        if message in replay.messages:
            shown.append(replay.messages.index(message))
        else:
            text = "|".join(p.text for p in message.parts if isinstance(p, TextPart))
            shown.append(f"{message.role}:{text}")
    return shown


def pairing(request: NeutralRequest) -> tuple[set[str], set[str]]:
    """(calls without a later result, results without an earlier call)."""
    called: set[str] = set()
    answered: set[str] = set()
    orphans: set[str] = set()
    for message in request.messages:
        for part in message.parts:
            if isinstance(part, ToolCallPart):
                called.add(part.call_id)
            elif isinstance(part, ToolResultPart):
                if part.call_id in called:
                    answered.add(part.call_id)
                else:
                    orphans.add(part.call_id)
    return called - answered, orphans


def result_texts(request: NeutralRequest) -> dict[str, str | None]:
    return {
        p.call_id: p.text for m in request.messages for p in m.parts if isinstance(p, ToolResultPart)
    }


def result_text_list(request: NeutralRequest) -> list[str | None]:
    """Result texts in message order (tau-bench reuses call ids, so no dict)."""
    return [p.text for m in request.messages for p in m.parts if isinstance(p, ToolResultPart)]


BUDGET = 600


def test_transcript_size_is_what_the_expectations_assume() -> None:
    replay = transcript()
    assert count_tokens(replay) == 1749
    assert [count_tokens(NeutralRequest(messages=(m,))) for m in replay.messages] == [
        11, 28, 522, 562, 13, 16, 10, 9, 13, 482, 13, 5, 8, 9
    ]


def test_all_strategies_fixed_order_and_protocol() -> None:
    strategies = all_strategies()
    assert [s.name for s in strategies] == [
        "replay",
        "last_n",
        "langchain_trim",
        "langchain_summarization",
        "langchain_clear_tool_uses",
        "autogen_buffered",
        "autogen_head_and_tail",
        "autogen_token_limited",
        "anthropic_clear_tool_uses",
        "openai_session_limit",
        "openai_tool_output_trimmer",
    ]
    assert all(isinstance(s, Strategy) for s in strategies)


def test_every_strategy_keeps_tools_and_system_and_is_deterministic() -> None:
    replay = transcript()
    for strategy in all_strategies():
        first = strategy.reduce(replay, budget_tokens=BUDGET, count_tokens=count_tokens)
        second = strategy.reduce(replay, budget_tokens=BUDGET, count_tokens=count_tokens)
        assert first == second, strategy.name
        assert first.tools == TOOLS, strategy.name
        assert first.system == SYSTEM, strategy.name


def test_generous_budget_leaves_every_strategy_at_replay() -> None:
    replay = transcript()
    for strategy in all_strategies():
        out = strategy.reduce(replay, budget_tokens=100_000, count_tokens=count_tokens)
        assert out == replay, strategy.name


def test_replay_returns_the_input_unchanged() -> None:
    replay = transcript()
    assert ReplayStrategy().reduce(replay, budget_tokens=10, count_tokens=count_tokens) is replay


def test_last_n_is_the_largest_window_that_fits() -> None:
    replay = transcript()
    out = LastNStrategy().reduce(replay, budget_tokens=BUDGET, count_tokens=count_tokens)
    assert kept(out, replay) == list(range(6, 14))
    assert count_tokens(out) == 597
    one_more = NeutralRequest(system=SYSTEM, messages=replay.messages[5:], tools=TOOLS)
    assert count_tokens(one_more) > BUDGET


def test_last_n_leaves_a_window_that_opens_on_a_tool_result() -> None:
    replay = transcript()
    out = LastNStrategy(n=5).reduce(replay, budget_tokens=BUDGET, count_tokens=count_tokens)
    assert kept(out, replay) == [9, 10, 11, 12, 13]
    assert pairing(out) == (set(), {"c4"})
    assert LastNStrategy(n=50).reduce(replay, budget_tokens=5, count_tokens=count_tokens) == replay
    # nothing fits: system blocks only
    assert LastNStrategy().reduce(replay, budget_tokens=5, count_tokens=count_tokens).messages == ()


def test_langchain_trim_starts_on_human_and_keeps_no_pairs_logic() -> None:
    replay = transcript()
    # The suffix that fits is [a(c5), t(c5), a, u]; start_on="human" drops to the question.
    out = LangChainTrimStrategy().reduce(replay, budget_tokens=BUDGET, count_tokens=count_tokens)
    assert kept(out, replay) == [13]
    assert out.system == SYSTEM
    # With room for the search output the suffix begins after the patch request's human turn.
    wider = LangChainTrimStrategy().reduce(replay, budget_tokens=1100, count_tokens=count_tokens)
    assert kept(wider, replay) == [7, 8, 9, 10, 11, 12, 13]


def test_langchain_summarization_summary_plus_pair_safe_tail() -> None:
    replay = transcript()
    out = LangChainSummarizationStrategy().reduce(replay, budget_tokens=BUDGET, count_tokens=count_tokens)
    summary = (
        "Here is a summary of the conversation to date:\n\n"
        "Fix the failing test in parser.py.\nGo ahead and patch it."
    )
    assert kept(out, replay) == [f"user:{summary}", 10, 11, 12, 13]
    assert count_tokens(out) <= BUDGET
    assert pairing(out) == (set(), set())


def test_langchain_summarization_fixed_keep_moves_cutoff_back_to_the_call() -> None:
    replay = transcript()
    # keep=1 token: the binary search lands on the last message; no tool message at the
    # boundary, so only the question is kept.
    out = LangChainSummarizationStrategy(keep_tokens=1).reduce(
        replay, budget_tokens=BUDGET, count_tokens=count_tokens
    )
    assert kept(out, replay)[1:] == [13]
    # keep = estimate of [t(c5), a, u]: the cutoff lands on t(c5) and moves back to a(c5).
    tail = estimate_messages_tokens(replay.messages[11:])
    out = LangChainSummarizationStrategy(keep_tokens=tail).reduce(
        replay, budget_tokens=BUDGET, count_tokens=count_tokens
    )
    assert kept(out, replay)[1:] == [10, 11, 12, 13]


def test_stub_summary_takes_200_characters_of_each_human_message() -> None:
    long_text = "x" * 250
    request = NeutralRequest(messages=(user(long_text), assistant("ignored"), user("second")))
    assert stub_summary(to_langchain(request)) == "x" * 200 + "\nsecond"


def test_langchain_clear_tool_uses_clears_all_but_the_last_three_results() -> None:
    replay = transcript()
    out = LangChainClearToolUsesStrategy().reduce(replay, budget_tokens=BUDGET, count_tokens=count_tokens)
    texts = result_texts(out)
    assert texts["c1"] == "[cleared]"
    assert texts["c2"] == "[cleared]"
    assert {k: texts[k] for k in ("c3", "c4", "c5")} == {
        k: v for k, v in result_texts(replay).items() if k in ("c3", "c4", "c5")
    }
    assert len(out.messages) == 14
    # still over budget: the edit only clears results
    assert count_tokens(out) == 679


def test_autogen_buffered_drops_a_leading_result_message() -> None:
    replay = transcript()
    # autogen messages: c1/c2 results form one FunctionExecutionResultMessage, so 13 in all.
    assert len(to_autogen(replay)) == 13
    fitted = AutogenBufferedStrategy().reduce(replay, budget_tokens=BUDGET, count_tokens=count_tokens)
    nine = AutogenBufferedStrategy(buffer_size=9).reduce(replay, budget_tokens=BUDGET, count_tokens=count_tokens)
    # buffer_size=9 opens on the result of c3, which is dropped: 8 messages come back.
    assert kept(nine, replay) == list(range(6, 14))
    assert fitted == nine
    ten = AutogenBufferedStrategy(buffer_size=10).reduce(replay, budget_tokens=BUDGET, count_tokens=count_tokens)
    assert kept(ten, replay) == list(range(4, 14))
    assert ten.system == SYSTEM


def test_autogen_head_and_tail_placeholder_and_its_miscount() -> None:
    replay = transcript()
    fitted = AutogenHeadAndTailStrategy().reduce(replay, budget_tokens=BUDGET, count_tokens=count_tokens)
    assert kept(fitted, replay) == [0, "user:Skipped 6 messages.", 8, 9, 10, 11, 12, 13]
    assert fitted.messages[1].name == "System"
    assert count_tokens(fitted) <= BUDGET
    # head 2 ends on an all-calls assistant message (dropped); tail 3 opens on a result
    # message (dropped); the placeholder still says 13 - 2 - 3 = 8 while 10 are hidden.
    fixed = AutogenHeadAndTailStrategy(head_size=2, tail_size=3).reduce(
        replay, budget_tokens=BUDGET, count_tokens=count_tokens
    )
    assert kept(fixed, replay) == [0, "user:Skipped 8 messages.", 12, 13]


def _services() -> NeutralRequest:
    messages = [user("Check the four services.")]
    for i in range(4):
        messages.append(assistant(None, (f"k{i}", "probe", json.dumps({"service": i}))))
        messages.append(result(f"k{i}", _long(f"svc{i}", 8)))
    messages.append(user("Which one is down?"))
    return NeutralRequest(messages=tuple(messages))


def test_autogen_token_limited_pops_the_middle_and_orphans() -> None:
    replay = _services()
    costs = [estimate_message_tokens(m) for m in replay.messages]
    assert costs == [9, 16, 109, 16, 109, 16, 109, 16, 109, 9]
    # 518 > 250: pop [5] a(k2) -> 502, pop [4] t(k1) -> 393, pop [4] t(k2) -> 284,
    # pop [3] a(k1) -> 268, pop [3] a(k3) -> 252, pop [2] t(k0) -> 143 <= 250.
    out = AutogenTokenLimitedStrategy(token_limit=250).reduce(replay, budget_tokens=0, count_tokens=count_tokens)
    assert kept(out, replay) == [0, 1, 8, 9]
    assert pairing(out) == ({"k0"}, {"k3"})
    # stopping at 284 <= 300 leaves k1's call without its result
    out = AutogenTokenLimitedStrategy(token_limit=300).reduce(replay, budget_tokens=0, count_tokens=count_tokens)
    assert kept(out, replay) == [0, 1, 2, 3, 7, 8, 9]
    assert pairing(out) == ({"k1"}, set())


def test_autogen_token_limited_on_the_transcript_orphans_the_parallel_calls() -> None:
    replay = transcript()
    out = AutogenTokenLimitedStrategy().reduce(replay, budget_tokens=BUDGET, count_tokens=count_tokens)
    assert kept(out, replay) == [0, 1, 12, 13]
    assert pairing(out) == ({"c1", "c2"}, set())


def test_anthropic_clear_tool_uses_defaults() -> None:
    replay = transcript()
    strategy = AnthropicClearToolUsesStrategy()
    out, applied = strategy.edit(replay, budget_tokens=BUDGET, count_tokens=count_tokens)
    texts = result_texts(out)
    assert [k for k, v in texts.items() if v == DEFAULT_PLACEHOLDER] == ["c1", "c2"]
    assert applied == AppliedClear(cleared_tool_uses=2, cleared_input_tokens=1749 - count_tokens(out))
    assert strategy.reduce(replay, budget_tokens=BUDGET, count_tokens=count_tokens) == out
    # not over the trigger: not applied
    assert strategy.edit(replay, budget_tokens=1749, count_tokens=count_tokens) == (replay, None)


def test_anthropic_clear_at_least_is_a_precondition() -> None:
    replay = transcript()
    _, applied = AnthropicClearToolUsesStrategy().edit(replay, budget_tokens=BUDGET, count_tokens=count_tokens)
    assert applied is not None
    saved = applied.cleared_input_tokens
    exact = AnthropicClearToolUsesStrategy(clear_at_least=saved)
    assert exact.edit(replay, budget_tokens=BUDGET, count_tokens=count_tokens)[1] == applied
    too_much = AnthropicClearToolUsesStrategy(clear_at_least=saved + 1)
    assert too_much.edit(replay, budget_tokens=BUDGET, count_tokens=count_tokens) == (replay, None)


def test_anthropic_exclusions_and_keep_accounting() -> None:
    replay = transcript()

    def cleared(strategy: AnthropicClearToolUsesStrategy) -> list[str]:
        out = strategy.reduce(replay, budget_tokens=BUDGET, count_tokens=count_tokens)
        return [k for k, v in result_texts(out).items() if v == strategy.placeholder]

    # uses in order: c1 read, c2 read, c3 run_tests, c4 search, c5 run_tests
    assert cleared(AnthropicClearToolUsesStrategy(exclude_tools=("search",), keep_tool_uses=2)) == ["c1", "c2"]
    assert cleared(
        AnthropicClearToolUsesStrategy(exclude_tools=("search",), keep_tool_uses=2, excluded_count_toward_keep=True)
    ) == ["c1", "c2", "c3"]
    assert cleared(AnthropicClearToolUsesStrategy(exclude_tools=("read_file",))) == []
    one = AnthropicClearToolUsesStrategy(exclude_tools=("read_file",), keep_tool_uses=1, placeholder="<gone>")
    out = one.reduce(replay, budget_tokens=BUDGET, count_tokens=count_tokens)
    assert [k for k, v in result_texts(out).items() if v == "<gone>"] == ["c3", "c4"]
    failed = next(p for m in out.messages for p in m.parts if isinstance(p, ToolResultPart) and p.call_id == "c3")
    assert failed.is_error is True


def test_anthropic_until_below_trigger_and_input_clearing() -> None:
    replay = transcript()
    trigger = 1749 - 300
    partial = AnthropicClearToolUsesStrategy(trigger_tokens=trigger, clear_mode="until_below_trigger")
    out, applied = partial.edit(replay, budget_tokens=BUDGET, count_tokens=count_tokens)
    assert [k for k, v in result_texts(out).items() if v == DEFAULT_PLACEHOLDER] == ["c1"]
    assert applied is not None and applied.cleared_tool_uses == 1
    assert count_tokens(out) <= trigger

    def arguments(request: NeutralRequest) -> dict[str, str]:
        return {p.call_id: p.arguments_json for m in request.messages for p in m.parts if isinstance(p, ToolCallPart)}

    all_inputs = AnthropicClearToolUsesStrategy(clear_tool_inputs=True).reduce(
        replay, budget_tokens=BUDGET, count_tokens=count_tokens
    )
    assert arguments(all_inputs) == {**arguments(replay), "c1": "{}", "c2": "{}"}
    named = AnthropicClearToolUsesStrategy(clear_tool_inputs=("search",)).reduce(
        replay, budget_tokens=BUDGET, count_tokens=count_tokens
    )
    assert arguments(named) == arguments(replay)


def test_openai_session_limit_fitted_and_orphan_outputs_dropped() -> None:
    replay = transcript()
    assert len(to_openai_items(NeutralRequest(messages=replay.messages[:13]))) == 15
    fitted = OpenAISessionLimitStrategy().reduce(replay, budget_tokens=BUDGET, count_tokens=count_tokens)
    assert kept(fitted, replay) == list(range(6, 14))
    # the latest 11 history items open on the outputs of c1 and c2, whose calls are outside
    eleven = OpenAISessionLimitStrategy(limit=11).reduce(replay, budget_tokens=BUDGET, count_tokens=count_tokens)
    assert kept(eleven, replay) == list(range(4, 14))
    # 13 items keep both calls but not the assistant text item before them
    thirteen = OpenAISessionLimitStrategy(limit=13).reduce(replay, budget_tokens=BUDGET, count_tokens=count_tokens)
    assert thirteen.messages[0] == assistant(
        None, ("c1", "read_file", '{"path": "parser.py"}'), ("c2", "read_file", '{"path": "test_parser.py"}')
    )
    assert kept(thirteen, replay)[1:] == list(range(2, 14))


def test_openai_session_limit_drops_an_unanswered_call() -> None:
    replay = NeutralRequest(
        messages=(user("first"), assistant(None, ("c9", "search", "{}")), user("never mind")),
        tools=TOOLS,
    )
    out = OpenAISessionLimitStrategy(limit=2).reduce(replay, budget_tokens=BUDGET, count_tokens=count_tokens)
    assert kept(out, replay) == [0, 2]


def test_openai_tool_output_trimmer_trims_old_outputs_and_keeps_every_pair() -> None:
    """The SDK's trimmer: older outputs above 500 characters become a 200-character
    preview; with the defaults (two recent turns kept) the transcript is still over 600
    tokens, so one recent turn is kept; nothing is dropped, every pair stays."""
    replay = transcript()
    out = OpenAIToolOutputTrimmerStrategy().reduce(replay, budget_tokens=BUDGET, count_tokens=count_tokens)
    assert [m.role for m in out.messages] == [m.role for m in replay.messages]
    assert pairing(out) == (set(), set())
    texts = result_texts(out)
    for call_id, tool, chars in (("c1", "read_file", len(_long("parser.py", 40))), ("c4", "search", len(_long("match", 40)))):
        assert (texts[call_id] or "").startswith(f"[Trimmed: {tool} output — {chars} chars → 200 char preview]\n"), call_id
    assert (texts["c3"], texts["c5"]) == (result_texts(replay)["c3"], "2 passed")  # short outputs untouched
    assert [p.is_error for m in out.messages for p in m.parts if isinstance(p, ToolResultPart)] == [False, False, True, False, False]
    assert count_tokens(out) <= BUDGET
    defaults = OpenAIToolOutputTrimmerStrategy._trim(replay, 2)  # the last two user turns untouched
    assert result_texts(defaults)["c4"] == result_texts(replay)["c4"] and count_tokens(defaults) > BUDGET


def rich() -> NeutralRequest:
    """Every part kind the converters carry, names, refs and odd argument text."""
    return NeutralRequest(
        system=("rules one", "rules two"),
        messages=(
            WireMessage(
                role="user",
                parts=(TextPart(text="look"), ImagePart(media_type="image/png", blob_key="sha256:ab", size_bytes=9)),
                name="alice",
                ref="msg_1",
            ),
            WireMessage(
                role="assistant",
                parts=(
                    ThinkingPart(text="plan", signature="sig"),
                    TextPart(text="two calls"),
                    ToolCallPart(call_id="t1", tool_name="search", arguments_json='{ "q": "x" }'),
                    ToolCallPart(call_id="t2", tool_name="shell", arguments_json="ls -la"),
                ),
                name="bot",
                ref="msg_2",
            ),
            WireMessage(role="tool", parts=(ToolResultPart(call_id="t1", text="", is_error=True),), ref="r1"),
            WireMessage(
                role="tool",
                parts=(ToolResultPart(call_id="t2", text=None, artifact_id="art_2", is_error=False),),
            ),
            WireMessage(role="assistant", parts=(TextPart(text=""),)),
            WireMessage(role="assistant", parts=(ToolCallPart(call_id="t3", tool_name="search"),)),
            WireMessage(role="tool", parts=(ToolResultPart(call_id="t3", text="ok"),)),
            WireMessage(role="user", parts=(TextPart(text="a"), TextPart(text="b"))),
        ),
        tools=TOOLS,
    )


def _without(request: NeutralRequest, *, name: bool, ref: bool, tool_name: bool = False) -> tuple[WireMessage, ...]:
    return tuple(
        WireMessage(
            role=m.role,
            parts=m.parts,
            name=None if name or (tool_name and m.role == "tool") else m.name,
            ref=None if ref else m.ref,
        )
        for m in request.messages
    )


def test_langchain_round_trip_is_lossless() -> None:
    request = rich()
    system, messages = from_langchain(to_langchain(request))
    assert system == request.system
    assert messages == request.messages


def test_autogen_round_trip_is_lossless_for_content() -> None:
    request = rich()
    converted = to_autogen(request, include_system=True)
    system, messages = from_autogen(converted)
    assert system == request.system
    assert messages == _without(request, name=False, ref=True, tool_name=True)
    # parallel results t1/t2 are one FunctionExecutionResultMessage named after their calls
    grouped = converted[4]
    assert [(r.call_id, r.name, r.is_error) for r in grouped.content] == [("t1", "search", True), ("t2", "shell", False)]  # type: ignore[union-attr]


def test_openai_round_trip_is_lossless_for_content() -> None:
    request = rich()
    items = to_openai_items(request, include_system=True)
    system, messages = from_openai_items(items)
    assert system == request.system
    assert messages == _without(request, name=True, ref=True)
    outputs = [i for i in items if i["type"] == "function_call_output"]
    assert outputs[0]["output"] == PARTS_MARKER + '{"is_error":true}'


def test_langchain_changed_arguments_come_back_as_the_new_json() -> None:
    lc = to_langchain(NeutralRequest(messages=(assistant(None, ("t1", "search", '{ "q": "x" }')),)))
    message = lc[0]
    assert isinstance(message, AIMessage)
    edited = message.model_copy(update={"tool_calls": [{**message.tool_calls[0], "args": {"q": "y"}}]})
    _, back = from_langchain([edited])
    assert back[0].parts == (ToolCallPart(call_id="t1", tool_name="search", arguments_json='{"q":"y"}'),)


def test_converters_do_not_repair_broken_pairing() -> None:
    broken = NeutralRequest(
        messages=(
            result("gone", "orphan output"),
            assistant("calling", ("open", "search", "{}")),
            user("next"),
        )
    )
    assert pairing(broken) == ({"open"}, {"gone"})
    assert from_langchain(to_langchain(broken))[1] == broken.messages
    assert from_autogen(to_autogen(broken))[1] == broken.messages
    assert from_openai_items(to_openai_items(broken))[1] == broken.messages


def test_largest_fitting_binary_search() -> None:
    assert largest_fitting(0, 10, lambda n: n <= 7) == 7
    assert largest_fitting(1, 10, lambda n: n <= 0) is None
    assert largest_fitting(3, 2, lambda n: True) is None


def tau_bench(path: Path) -> NeutralRequest:
    """A tau-bench OpenAI-chat trajectory as a neutral request (tools named from its calls)."""
    data = json.loads(path.read_text(encoding="utf-8"))
    system: list[str] = []
    messages: list[WireMessage] = []
    names: set[str] = set()
    for entry in data["traj"]:
        role = entry["role"]
        if role == "system":
            system.append(entry["content"])
        elif role == "user":
            messages.append(user(entry["content"]))
        elif role == "assistant":
            calls = [
                (c["id"], c["function"]["name"], c["function"]["arguments"]) for c in entry.get("tool_calls") or []
            ]
            names.update(name for _, name, _ in calls)
            messages.append(assistant(entry.get("content"), *calls))
        else:
            messages.append(result(entry["tool_call_id"], entry["content"]))
    tools = tuple(ToolSchema(name=name) for name in sorted(names))
    return NeutralRequest(system=tuple(system), messages=tuple(messages), tools=tools)


@pytest.mark.parametrize(
    ("name", "expected_results"), [("task033_trial0_idx033.json", 23), ("task002_trial2_idx102.json", 13)]
)
def test_real_tau_bench_transcript(name: str, expected_results: int) -> None:
    require_real_data()
    replay = tau_bench(REAL / "tau-bench-airline-gpt4o" / name)
    assert pairing(replay) == (set(), set())
    assert len(result_text_list(replay)) == expected_results
    expected = (replay.system, replay.messages)
    assert from_langchain(to_langchain(replay)) == expected
    assert from_autogen(to_autogen(replay, include_system=True)) == expected
    assert from_openai_items(to_openai_items(replay, include_system=True)) == expected
    budget = count_tokens(replay) // 3
    results = expected_results
    for strategy in all_strategies():
        out = strategy.reduce(replay, budget_tokens=budget, count_tokens=count_tokens)
        assert out == strategy.reduce(replay, budget_tokens=budget, count_tokens=count_tokens), strategy.name
        assert out.tools == replay.tools and out.system == replay.system, strategy.name
        if strategy.name in ("last_n", "autogen_buffered", "autogen_head_and_tail", "openai_session_limit",
                             "langchain_summarization"):
            assert count_tokens(out) <= budget, strategy.name
        if strategy.name == "last_n":
            assert out.messages == replay.messages[len(replay.messages) - len(out.messages):]
            wider = NeutralRequest(
                system=replay.system,
                messages=replay.messages[len(replay.messages) - len(out.messages) - 1 :],
                tools=replay.tools,
            )
            assert count_tokens(wider) > budget
        if strategy.name == "langchain_clear_tool_uses":
            assert result_text_list(out).count("[cleared]") == results - 3
        if strategy.name == "anthropic_clear_tool_uses":
            assert result_text_list(out).count(DEFAULT_PLACEHOLDER) == results - 3
        if strategy.name == "openai_session_limit":
            assert pairing(out) == (set(), set())
        if strategy.name == "langchain_summarization":
            assert pairing(out) == (set(), set())
