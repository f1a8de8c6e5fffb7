"""Format parity over every bench scenario: the same graph, policy, budget and ``now`` give
an OpenAI Responses assembly that selects every record and shows every must-see fact of
the Chat Completions assembly, at the scenario's budget and at half, twice and four times
it.  The Responses framing of a request is never larger than its Chat Completions
framing (both carry a speaker label in the text; Chat Completions sends it as ``name``
too), so a format's overhead never displaces evidence.
(The real transcripts are checked the same way in ``test_bench_real.py``.)
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from contextledger.bench.probes import check_probes
from contextledger.bench.scenarios import all_scenarios
from contextledger.ledger import Ledger
from contextledger.providers.registry import count_payload_tokens, serialize
from contextledger.tokens import get_tokenizer

CASES = [s.name for s in all_scenarios()]
SHARES = (0.5, 1, 2, 4)
FORMATS = ("openai-chat", "openai-responses")


@pytest.fixture(scope="module")
def assemblies() -> Iterator[dict[tuple[str, float, str], dict[str, Any]]]:
    out: dict[tuple[str, float, str], dict[str, Any]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for sc in all_scenarios():
            ledger = Ledger.open(home=Path(tmp) / sc.name)
            try:
                b = sc.build(ledger, 1)
                for share in SHARES:
                    budget = int(b.budget_tokens * share)
                    for provider in FORMATS:
                        res = ledger.assemble(
                            b.conversation_id, branch_id=b.branch_id, participant_id=b.participant_id, provider=provider,
                            budget_tokens=budget, now=b.now, persist=False, replay="estimate",
                        )
                        probe = check_probes(res.payload, b.must_see, b.must_not_see)
                        out[(sc.name, share, provider)] = {
                            "refs": set(res.record.selected_refs), "missing": set(probe.missing), "leaked": list(probe.leaked),
                            "tokens": res.record.assembled_tokens, "budget": budget, "request": res.request,
                        }
            finally:
                ledger.close()
        yield out


@pytest.mark.parametrize("share", SHARES)
@pytest.mark.parametrize("case", CASES)
def test_responses_selects_every_record_and_fact_of_chat(assemblies: dict[tuple[str, float, str], dict[str, Any]], case: str, share: float) -> None:
    chat, resp = assemblies[(case, share, "openai-chat")], assemblies[(case, share, "openai-responses")]
    assert chat["refs"]
    assert sorted(chat["refs"] - resp["refs"]) == []
    assert sorted(resp["missing"] - chat["missing"]) == []
    # where even the mandatory state does not fit (half of a seed budget), neither fits
    assert (resp["tokens"] <= resp["budget"]) == (chat["tokens"] <= chat["budget"])
    assert sorted(set(resp["leaked"]) - set(chat["leaked"])) == []


@pytest.mark.parametrize("share", SHARES)
@pytest.mark.parametrize("case", CASES)
def test_responses_framing_within_the_chat_framing(assemblies: dict[tuple[str, float, str], dict[str, Any]], case: str, share: float) -> None:
    """The Chat assembly's own request, counted as both payloads: Responses costs no more
    than Chat Completions."""
    req = assemblies[(case, share, "openai-chat")]["request"]
    chat = count_payload_tokens("openai-chat", serialize("openai-chat", req))
    resp = count_payload_tokens("openai-responses", serialize("openai-responses", req))
    assert chat == assemblies[(case, share, "openai-chat")]["tokens"]
    assert resp <= chat


def test_a_speaker_label_is_in_the_text_of_both_openai_formats() -> None:
    """A debate's labelled message: the same ``[label] `` text in both formats, and Chat
    Completions' ``name`` field on top (its name and one token)."""
    from contextledger.providers.base import NeutralRequest, WireMessage
    from contextledger.records.parts import TextPart

    req = NeutralRequest(messages=(WireMessage(role="user", parts=(TextPart(text="Open the debate."),)), WireMessage(role="assistant", parts=(TextPart(text="Buses save energy."),), name="pro")))
    chat = count_payload_tokens("openai-chat", serialize("openai-chat", req))
    resp = count_payload_tokens("openai-responses", serialize("openai-responses", req))
    assert chat - resp == len(get_tokenizer().encode("pro")) + 1
    assert serialize("openai-chat", req)["messages"][1] == {"role": "assistant", "name": "pro", "content": "[pro] Buses save energy."}
    assert serialize("openai-responses", req)["input"][1] == {"type": "message", "role": "assistant", "content": "[pro] Buses save energy."}
