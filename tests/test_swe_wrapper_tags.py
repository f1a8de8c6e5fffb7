"""The wrapper tags a scaffold puts around the task (SWE-agent / mini-swe-agent
``<pr_description>`` … ``</pr_description>``, ``<instructions>``, OpenHands
``<uploaded_files>``, ``<NOTE>``, ``<IMPORTANT>``) are markup, never the user's words:
no pinned constraint, task goal or title starts or ends with one of them, and inline
markup inside a sentence (``<b>Never</b> push``) is kept verbatim.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from conftest import real_params
from contextledger.ingest.importers import parse_file
from contextledger.ingest.importers.common import title_of
from contextledger.ingest.preambles import strip_wrappers, user_text
from contextledger.policy.constraint_text import constraint_passages
from contextledger.policy.constraints import extract_user_constraints
from contextledger.records.parts import TextPart

_MINI = (
    "<pr_description>\nConsider the following PR description:\nThe parser drops the last token.\n"
    "Do not modify the tests.\n</pr_description>\n\n<instructions>\n# Task Instructions\n"
    "You must not edit files under tests/.</instructions>"
)


@pytest.mark.parametrize(("text", "expected"), [
    ("<pr_description>\nFix it.\n</pr_description>", "Fix it."),
    ("Do not use interactive pagers.</NOTE>", "Do not use interactive pagers."),
    ("</pr_description> Never push", "Never push"),
    ("Keep it.</pr_description>\n<instructions>", "Keep it."),
    ("<IMPORTANT>Never push to main</IMPORTANT>", "Never push to main"),
    ("<a>", ""),
    ("open <path>", "open <path>"),
    ("x <b>y</b>", "x <b>y</b>"),
    ("<b>Never</b> push", "<b>Never</b> push"),
    ("<x>a</x> <y>b</y>", "<x>a</x> <y>b</y>"),
])
def test_wrapper_tags_at_both_ends_go_inline_markup_stays(text: str, expected: str) -> None:
    assert strip_wrappers(text) == expected


def test_constraints_of_a_wrapped_task_are_the_sentences_alone() -> None:
    assert [p.text for p in constraint_passages(_MINI)] == [
        "Do not modify the tests.", "You must not edit files under tests/.",
    ]
    for text in ("<NOTE>Do not use interactive pagers.</NOTE>", "See above. Do not use interactive pagers.</NOTE>"):
        assert [p.text for p in constraint_passages(text)] == ["Do not use interactive pagers."]
    assert [p.text for p in constraint_passages("<pr_description>Never touch setup.py</pr_description>")] == ["Never touch setup.py"]


def test_a_pinned_constraint_is_still_verbatim_in_its_message() -> None:
    rules = extract_user_constraints(_MINI, message_id="m1")
    assert [r.text for r in rules] == ["Do not modify the tests.", "You must not edit files under tests/."]
    assert all(r.pinned and r.text in _MINI for r in rules)


def test_title_and_goal_have_no_wrapper_tags() -> None:
    assert title_of(_MINI) == "Consider the following PR description: The parser drops the last token. Do not…"
    goal = user_text("<pr_description>\nFix the parser.\n</pr_description>\n")
    assert goal == "Fix the parser."
    # a wrapper closed mid-text keeps both of its tags (no stray closing tag is left)
    assert user_text(_MINI).startswith("<pr_description>\n") and user_text(_MINI).endswith("</instructions>")


_EDGE_TAG = re.compile(r"^</?[A-Za-z][\w.:-]*(?:\s[^<>\n]*)?>|</[A-Za-z][\w.:-]*>$")


@pytest.mark.parametrize("path", real_params("**/*.json", "**/*.jsonl", "**/*.traj", "**/*.md"), ids=lambda p: p.name if p else "real-data")
def test_no_real_pinned_constraint_or_title_starts_or_ends_with_a_tag(path: Path) -> None:
    if path.name in ("manifest.json", "SOURCES.md"):
        pytest.skip("not a transcript")
    transcript = parse_file(path)
    assert not _EDGE_TAG.search(transcript.title or ""), transcript.title
    for m in transcript.messages:
        if m.role.value != "user":
            continue
        text = "\n".join(p.text for p in m.parts if isinstance(p, TextPart))
        for rule in extract_user_constraints(text, message_id=m.key):
            assert not _EDGE_TAG.search(rule.text), (m.source_ref, rule.text)
            assert rule.text in text


def test_real_mini_swe_agent_task_is_titled_by_its_words() -> None:
    paths = real_params("mini-swe-agent-deepseek/*.traj.json")
    if not isinstance(paths[0], Path):
        pytest.skip("real data folder absent")
    for path in paths:
        title = parse_file(path).title
        assert title.startswith("Consider the following PR description: "), (path.name, title)

