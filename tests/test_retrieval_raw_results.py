"""The keyword route reads a tool result's own text wherever it is stored (seed 001
§4.5: keyword search of "function names, error codes, field names"): an identifier far
into a file read kept as a blob is found by its own words, on the live recorder and the
batch path alike, on both backends; a secret in a result never enters the index."""

from __future__ import annotations

from contextledger.ingest.batch import Exchange, record_exchanges
from contextledger.ledger import Ledger
from contextledger.retrieval import search
from contextledger.retrieval.documents import RAW_DOC_TOKENS, keyword_tokens, searchable_artifact
from contextledger.retrieval.text import MAX_DOC_TOKENS


def _source_file(marker: str) -> str:
    """A 24 kB source file (a blob, not inline) whose only mention of ``marker`` is on
    its last lines, after several hundred distinct identifiers."""
    body = [
        f"export function helper{i}(value{i}: number) {{ return value{i} * {i}; }}"
        for i in range(400)
    ]
    return "\n".join([*body, f"export const {marker} = (root) => root.querySelectorAll('code');"])


def _doc_tokens(ledger: Ledger, record_id: str) -> set[str]:
    import sqlalchemy as sa

    from contextledger.store import schema as S

    d = S.retrieval_docs
    with ledger.store.reader() as c:
        row = c.execute(sa.select(d.c.tokens).where(d.c.record_id == record_id)).one()
    return set(row.tokens.split())


def test_an_identifier_deep_in_a_blob_result_is_found_by_the_keyword_route(ledger: Ledger) -> None:
    rec = ledger.recorder()
    conv = rec.start_conversation(title="highlighting")
    text = _source_file("highlightTranscriptCode")
    assert len(text.encode()) > 16_000
    _, calls = rec.record_assistant(
        conv.id,
        tool_calls=[
            {"call_id": "r1", "tool_name": "Read", "arguments": {"file_path": "assets/js/app.js"}}
        ],
    )
    _, art, mem = rec.record_tool_result(conv.id, calls[0].call_id, text)
    assert art.blob_key is not None and art.inline_text is None
    assert "highlighttranscriptcode" in _doc_tokens(ledger, str(mem.id))
    user = rec.record_message(conv.id, "user", "Why is the code highlighting slow?")
    hits = search(
        ledger,
        ledger.scope("default"),
        conv.id,
        "highlightTranscriptCode",
        limit=5,
        routes=("keyword",),
    ).hits
    # the whole identifier leads; the question shares only its pieces (highlight, code)
    assert [h.record_id for h in hits] == [str(mem.id), str(user.id)]
    assert hits[0].scores["keyword"] > hits[1].scores["keyword"]


def test_the_batch_path_indexes_the_same_tokens_as_the_live_recorder(sqlite_ledger: Ledger) -> None:
    text = _source_file("renderDiffGutter")
    rec = sqlite_ledger.recorder()
    live = rec.start_conversation(title="live")
    _, calls = rec.record_assistant(
        live.id,
        tool_calls=[{"call_id": "r1", "tool_name": "Read", "arguments": {"file_path": "a.js"}}],
    )
    _, _, live_mem = rec.record_tool_result(live.id, calls[0].call_id, text)
    batch = rec.start_conversation(title="batch")
    (out,) = record_exchanges(
        rec,
        batch.id,
        [Exchange(call_id="b1", tool_name="Read", arguments={"file_path": "a.js"}, result=text)],
    )
    assert out.artifact.blob_key is not None
    assert _doc_tokens(sqlite_ledger, str(out.memory.id)) == _doc_tokens(
        sqlite_ledger, str(live_mem.id)
    )
    assert "renderdiffgutter" in _doc_tokens(sqlite_ledger, str(out.memory.id))


def test_a_secret_in_a_blob_result_is_not_indexed(sqlite_ledger: Ledger) -> None:
    rec = sqlite_ledger.recorder()
    conv = rec.start_conversation(title="env")
    key = "sk-proj-" + "Zq8vT3mX9pL2wR7nB4kY6hJ1cF5dG0sA"
    text = _source_file("loadEnvironment") + f"\nOPENAI_API_KEY={key}\n"
    _, calls = rec.record_assistant(
        conv.id,
        tool_calls=[
            {"call_id": "c1", "tool_name": "Bash", "arguments": {"command": "cat .env.all"}}
        ],
    )
    _, _, mem = rec.record_tool_result(conv.id, calls[0].call_id, text)
    toks = _doc_tokens(sqlite_ledger, str(mem.id))
    assert "loadenvironment" in toks
    assert not [t for t in toks if "zq8vt3mx9pl2wr7nb4ky6hj1cf5dg0sa" in t]


def test_the_token_caps_and_the_searchable_artifact(sqlite_ledger: Ledger) -> None:
    rec = sqlite_ledger.recorder()
    conv = rec.start_conversation(title="caps")
    _, calls = rec.record_assistant(
        conv.id,
        tool_calls=[{"call_id": "c1", "tool_name": "Read", "arguments": {"file_path": "big.ts"}}],
    )
    text = "\n".join(f"const name{i}x = {i};" for i in range(3000))
    _, art, mem = rec.record_tool_result(conv.id, calls[0].call_id, text)
    assert len(keyword_tokens(mem, searchable_artifact(art, text))) == RAW_DOC_TOKENS
    assert len(keyword_tokens(mem)) <= MAX_DOC_TOKENS
    assert searchable_artifact(art, art.inline_text) is art
    assert searchable_artifact(art, "x").inline_text == "x" and art.inline_text is None
