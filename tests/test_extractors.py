"""Extractor tests on real tool outputs from /work/shared/data/real (read with json)."""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from typing import Any

import pytest

from conftest import real_data_dir
from contextledger.errors import InputError
from contextledger.memory.extractors import (
    ExtractorRegistry,
    GenericExtractor,
    ScriptedSummarizer,
    ToolInput,
    ToolOutputBudget,
    apply_summarizer,
    default_registry,
    needs_artifact_ref,
)
from contextledger.memory.extractors.base import Extraction
from contextledger.records.enums import ConfidenceBasis, ContextKind, FreshnessClass, Shape

REAL = real_data_dir()
pytestmark = pytest.mark.skipif(not REAL.is_dir(), reason="real transcripts not available")


def _item(
    tool: str, args: str, text: str, *, is_error: bool = False, action: str | None = None
) -> ToolInput:
    return ToolInput(
        tool_name=tool,
        arguments_json=args,
        result_text=text,
        is_error=is_error,
        size_bytes=len(text.encode()),
        action_text=action,
    )


def _openai_pairs(messages: list[dict[str, Any]]) -> dict[int, tuple[str, str, str]]:
    calls: dict[str, dict[str, Any]] = {}
    out: dict[int, tuple[str, str, str]] = {}
    for i, m in enumerate(messages):
        for tc in m.get("tool_calls") or []:
            calls[tc["id"]] = tc
        if m.get("role") == "tool":
            tc = calls[m["tool_call_id"]]
            content = m["content"]
            if isinstance(content, list):
                content = "".join(p.get("text", "") for p in content)
            out[i] = (tc["function"]["name"], tc["function"]["arguments"], content)
    return out


def _claude_pair(path: str, line_no: int) -> tuple[str, str, str, bool]:
    uses: dict[str, dict[str, Any]] = {}
    with (REAL / path).open() as fh:
        for n, line in enumerate(fh):
            record = json.loads(line)
            content = (record.get("message") or {}).get("content")
            if not isinstance(content, list):
                continue
            for block in content:
                if block.get("type") == "tool_use":
                    uses[block["id"]] = block
                if block.get("type") == "tool_result" and n == line_no:
                    use = uses[block["tool_use_id"]]
                    text = block["content"]
                    if isinstance(text, list):
                        text = "".join(p.get("text", "") for p in text if p.get("type") == "text")
                    return use["name"], json.dumps(use["input"]), text, bool(block.get("is_error"))
    raise AssertionError(f"no tool result at {path}:{line_no}")


REG = default_registry(
    schema_hints={"get_reservation_details": ["reservation_id", "cabin", "flights.0.flight_number"]}
)


# --- test runs -------------------------------------------------------------------------


def test_real_pytest_failure_swe_smith() -> None:
    data = json.loads((REAL / "adp-swe-smith/getmoto__moto.694ce1f4.pr_6055.json").read_text())
    text = data["messages"][57]["content"]
    command = "cd /testbed && python -m pytest tests/test_athena/test_athena.py -v"
    ext = REG.extract(_item("bash", json.dumps({"command": command}), text))
    assert ext.kind == "test_run"
    assert ext.shape == Shape.STRUCTURED
    p = ext.payload
    assert list(p)[:6] == ["command", "status", "error", "file", "test", "next_step"]
    assert p["command"] == command
    assert p["status"] == "failed"
    assert p["counts"] == {"failed": 1, "passed": 22}
    assert p["duration_s"] == 0.49
    assert p["test"] == "tests/test_athena/test_athena.py::test_list_named_queries"
    assert p["error"] == "AttributeError: 'str' object has no attribute 'name'"
    assert p["file"] == "moto/athena/models.py:399"
    assert (
        p["next_step"]
        == "inspect moto/athena/models.py:399 (tests/test_athena/test_athena.py::test_list_named_queries)"
    )
    assert p["failures_total"] == 1
    assert ext.subject_key == f"test:{command}"
    assert ext.error_type == "AttributeError"
    assert ext.confidence == 1.0 and ext.confidence_basis == ConfidenceBasis.DETERMINISTIC_PARSE
    assert ext.revalidation_tool == "bash" and ext.revalidation_args == {"command": command}
    # provenance: the body starts after the "OBSERVATION:" banner line
    assert ext.line_range == (2, 123)
    assert ext.byte_range == (13, len(text.encode()))
    assert ext.summary.splitlines()[0] == f"tests: {command} → failed: 1 failed, 22 passed in 0.49s"


def test_real_pytest_collection_errors_mini_swe_agent() -> None:
    data = json.loads(
        (REAL / "mini-swe-agent-deepseek/lite_dev__sqlfluff__sqlfluff-2419.traj.json").read_text()
    )
    name, args, text = _openai_pairs(data["messages"])[65]
    ext = REG.extract(_item(name, args, text))
    p = ext.payload
    assert ext.kind == "test_run"
    assert p["status"] == "error"
    assert p["exit_code"] == 0  # piped through `head`: the shell's code is head's
    assert p["counts"] == {"deselected": 675, "errors": 3}
    assert [f["test"] for f in p["failures"]] == [
        "dialects/bigquery_test.py",
        "dialects/dialects_test.py",
        "rules/std_fix_auto_test.py",
    ]
    assert p["failures"][0] == {
        "test": "dialects/bigquery_test.py",
        "kind": "error",
        "message": "ModuleNotFoundError: No module named 'hypothesis'",
        "location": "dialects/bigquery_test.py:3",
    }
    assert p["failures"][1]["location"] == "conftest.py:33"


def test_synthetic_runners_unittest_go_cargo_jest() -> None:
    unittest_out = (
        "F.\n======================================================================\n"
        "FAIL: test_add (tests.test_math.MathTest.test_add)\n"
        "----------------------------------------------------------------------\n"
        "Traceback (most recent call last):\n"
        '  File "/repo/tests/test_math.py", line 9, in test_add\n'
        "    self.assertEqual(add(1, 1), 3)\n"
        "AssertionError: 2 != 3\n\n"
        "----------------------------------------------------------------------\n"
        "Ran 2 tests in 0.001s\n\nFAILED (failures=1)\n"
    )
    p = REG.extract(_item("Bash", '{"command": "python -m unittest"}', unittest_out)).payload
    assert p["framework"] == "unittest"
    assert p["counts"] == {"passed": 1, "failed": 1, "errors": 0, "skipped": 0}
    assert p["failures"] == [
        {
            "test": "tests.test_math.MathTest.test_add",
            "kind": "failed",
            "message": "AssertionError: 2 != 3",
            "location": "/repo/tests/test_math.py:9",
        }
    ]
    go_out = "=== RUN   TestSum\n    sum_test.go:12: got 3, want 4\n--- FAIL: TestSum (0.00s)\n=== RUN   TestOk\n--- PASS: TestOk (0.00s)\nFAIL\nFAIL\texample.com/m\t0.004s\n"
    p = REG.extract(_item("Bash", '{"command": "go test -v ./..."}', go_out)).payload
    assert (p["framework"], p["status"], p["counts"]) == (
        "go",
        "failed",
        {"passed": 1, "failed": 1, "skipped": 0},
    )
    assert p["failures"][0] == {
        "test": "TestSum",
        "kind": "failed",
        "message": "got 3, want 4",
        "location": "sum_test.go:12",
    }
    cargo_out = (
        "running 2 tests\ntest tests::ok ... ok\ntest tests::bad ... FAILED\n\nfailures:\n\n"
        "---- tests::bad stdout ----\nthread 'tests::bad' panicked at src/lib.rs:10:5:\nassertion `left == right` failed\n\n"
        "test result: FAILED. 1 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s\n"
    )
    p = REG.extract(_item("Bash", '{"command": "cargo test"}', cargo_out)).payload
    assert p["counts"] == {"passed": 1, "failed": 1, "ignored": 0}
    assert p["failures"][0] == {
        "test": "tests::bad",
        "kind": "failed",
        "message": "assertion `left == right` failed",
        "location": "src/lib.rs:10",
    }
    jest_out = "FAIL src/auth/session.test.ts\n  ● auth › redirects after login\n\n    TypeError: user.id should be string\n\n      at Object.<anonymous> (src/auth/session.ts:42:7)\n\nTests:       1 failed, 5 passed, 6 total\n"
    p = REG.extract(_item("Bash", '{"command": "pnpm test auth"}', jest_out)).payload
    assert p["command"] == "pnpm test auth" and p["status"] == "failed"
    assert p["error"] == "TypeError: user.id should be string"
    assert p["file"] == "src/auth/session.ts:42"
    assert p["test"] == "auth › redirects after login"
    assert p["counts"] == {"failed": 1, "passed": 5}


# --- commands and errors ---------------------------------------------------------------


def test_real_bash_error_claude_code() -> None:
    name, args, text, is_error = _claude_pair(
        "marot-spotter/8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl", 1132
    )
    assert (name, is_error) == ("Bash", True)
    ext = REG.extract(_item(name, args, text, is_error=is_error))
    p = ext.payload
    assert ext.kind == "command"
    assert ext.context_kind == ContextKind.RECOVERY
    assert p["exit_code"] == 1 and p["status"] == "failed"
    assert ext.error_type == "JSONDecodeError"
    assert (
        p["error_line"]
        == "json.decoder.JSONDecodeError: Unterminated string starting at: line 1 column 256 (char 255)"
    )
    assert p["stack"][-1] == p["error_line"]
    assert p["stack"][0] == 'File "/usr/lib/python3.12/json/__init__.py", line 346, in loads'
    assert len(p["stack"]) == 7
    # first error line and error type are in what the model sees
    assert p["error_line"] in ext.summary and "JSONDecodeError" in ext.summary.splitlines()[0]
    assert ext.line_range == (2, 13)  # after the "Exit code 1" banner


def test_real_openhands_exit_code_and_typescript_error() -> None:
    data = json.loads((REAL / "adp-swe-gym-openhands/Project-MONAI__MONAI-3715_4.json").read_text())
    name, args, text = _openai_pairs(data["messages"])[13]
    p = REG.extract(_item(name, args, text)).payload
    assert (p["exit_code"], p["status"], p["error_type"]) == (1, "failed", "TypeError")
    assert p["error_line"] == "TypeError: __init__() got an unexpected keyword argument 'network'"
    name, args, text, is_error = _claude_pair(
        "claude-code-viewer-dkimuson/fe5e1c67-53e7-4862-81ae-d0e013e3270b.jsonl", 277
    )
    ext = REG.extract(_item(name, args, text, is_error=is_error))
    assert ext.error_type == "TS2307"
    assert ext.payload["error_line"].startswith("src/hooks/useTodos.test.ts(6,33): error TS2307")


def test_command_not_found_and_codex_banner() -> None:
    ext = REG.extract(
        _item("bash", '{"command": "foo --x"}', "bash: line 1: foo: command not found\n")
    )
    assert (ext.payload["status"], ext.error_type, ext.confidence_basis) == (
        "failed",
        "command not found",
        ConfidenceBasis.HEURISTIC,
    )
    codex = "Chunk ID: 46d351\nWall time: 0.2500 seconds\nProcess exited with code 0\nOriginal token count: 18\nOutput:\n    8803 /tmp/a.vtt\n"
    p = REG.extract(_item("exec_command", '{"cmd": "wc -l /tmp/a.vtt"}', codex)).payload
    assert (p["exit_code"], p["duration_ms"], p["status"], p["head"]) == (
        0,
        250,
        "succeeded",
        ["    8803 /tmp/a.vtt"],
    )


# --- file reads and writes -------------------------------------------------------------


def test_real_claude_code_read() -> None:
    name, args, text, _ = _claude_pair(
        "claude-code-viewer-dkimuson/5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl", 20
    )
    ext = REG.extract(_item(name, args, text))
    p = ext.payload
    assert ext.kind == "file_read"
    assert ext.subject_key == "file:/path/to/Demo/todo-app/package.json"
    assert p["line_range"] == [1, 29] and p["lines_returned"] == 29
    content = "\n".join(
        line.split("→", 1)[1] for line in text.split("\n\n<system-reminder>")[0].split("\n")
    )
    assert p["content_sha256"] == "sha256:" + hashlib.sha256(content.encode()).hexdigest()
    assert p["size_bytes"] == len(content.encode())
    assert ext.freshness_class == FreshnessClass.SESSION
    assert ext.revalidation_tool == "Read" and ext.revalidation_args == {
        "file_path": "/path/to/Demo/todo-app/package.json"
    }
    assert ext.line_range == (1, 29)  # the system reminder is not evidence


def test_real_openhands_view_and_swe_agent_open_symbols() -> None:
    data = json.loads((REAL / "adp-swe-gym-openhands/Project-MONAI__MONAI-3715_4.json").read_text())
    pairs = _openai_pairs(data["messages"])
    ext = REG.extract(_item(*pairs[9]))
    assert ext.kind == "file_read"
    assert ext.payload["path"] == "/workspace/Project-MONAI__MONAI__0.8/monai/engines/evaluator.py"
    assert ext.payload["line_range"] == [120, 140]
    listing = REG.extract(_item(*pairs[5]))
    assert (
        listing.kind == "search"
        and listing.payload["root"] == "/workspace/Project-MONAI__MONAI__0.8"
    )
    rejected_view = REG.extract(_item(*pairs[3]))
    assert rejected_view.kind == "file_read" and rejected_view.error_type == "error"
    assert "view_range" in rejected_view.summary
    traj = json.loads((REAL / "swe-agent/ctf__crypto__BabyTimeCapsule.traj").read_text())
    step = traj["trajectory"][0]
    ext = REG.extract(_item("swe-agent", "{}", step["observation"], action=step["action"]))
    assert (
        ext.payload["path"]
        == "/__Users__user__LLM_CTF_Dataset_Dev__HTB__crypto__baby_time_capsule/server.py"
    )
    assert ext.payload["total_lines"] == 76
    assert ext.payload["line_range"] == [1, 76]
    assert ext.payload["symbols"] == [
        "class TimeCapsule",
        "def challenge",
        "class MyTCPRequestHandler",
        "class ThreadingTCPServer",
        "def main",
    ]


def test_real_writes_edit_create_and_rejected_swe_edit() -> None:
    name, args, text, _ = _claude_pair("claude-reliability-snapshots/coverage-test-fix.jsonl", 12)
    ext = REG.extract(_item(name, args, text))
    assert ext.kind == "file_write" and ext.shape == Shape.DIFF
    assert ext.payload["added_lines"] == 5 and ext.payload["removed_lines"] == 0
    assert "+def multiply_numbers(a: int, b: int) -> int:" in ext.payload["diff"]
    data = json.loads((REAL / "adp-swe-gym-openhands/Project-MONAI__MONAI-3715_4.json").read_text())
    created = REG.extract(_item(*_openai_pairs(data["messages"])[11]))
    assert created.kind == "generated_file" and created.freshness_class == FreshnessClass.DURABLE
    handle = created.payload["file"]
    assert handle["name"] == "reproduce_error.py" and handle["mime_type"] == "text/x-python"
    file_text = json.loads(_openai_pairs(data["messages"])[11][1])["file_text"]
    assert handle["size_bytes"] == len(file_text.encode())
    traj = json.loads((REAL / "swe-agent/ctf__crypto__BabyEncryption.traj").read_text())
    step = traj["trajectory"][7]
    bad = REG.extract(_item("swe-agent", "{}", step["observation"], action=step["action"]))
    assert bad.payload["applied"] is False and bad.error_type == "IndentationError"
    assert bad.context_kind == ContextKind.RECOVERY


def test_codex_apply_patch() -> None:
    patch = "*** Begin Patch\n*** Update File: src/a.ts\n@@\n   x,\n+  y,\n-  z,\n*** End Patch\n"
    out = '{"output":"Success. Updated the following files:\\nM src/a.ts\\n","metadata":{"exit_code":0,"duration_seconds":0.9}}'
    ext = REG.extract(_item("apply_patch", patch, out))
    assert ext.kind == "file_write"
    assert (ext.payload["paths"], ext.payload["added_lines"], ext.payload["removed_lines"]) == (
        ["src/a.ts"],
        1,
        1,
    )
    assert ext.subject_key == "file:src/a.ts"


# --- searches --------------------------------------------------------------------------


def test_real_grep_content_and_files_modes() -> None:
    path = "codemie-code/claude-code/incremental-subagents/turn-2/subagents/agent-a485154.jsonl"
    ext = REG.extract(_item(*_claude_pair(path, 19)[:3]))
    p = ext.payload
    assert ext.kind == "search" and ext.subject_key == "search:export function create\\w+Command in /Users/User/repo/codemie-ai/codemie-code/src/cli/commands"
    assert (p["match_count"], p["file_count"]) == (15, 13)
    assert p["matches"][0] == {
        "path": "src/cli/commands/uninstall.ts",
        "line": 7,
        "text": "export function createUninstallCommand(): Command {",
    }
    assert ext.limits == "first 10 of 15 matches"
    files = REG.extract(_item(*_claude_pair(path, 35)[:3])).payload
    assert files["match_count"] == 6 and files["files"][-1] == "src/cli/commands/doctor/README.md"


def test_real_swe_agent_find_file_and_search_file() -> None:
    traj = json.loads(
        (
            REAL
            / "swe-agent/test_data__gpt4__swe-bench-dev-easy_first_only__default__t-0.00__p-0.95__c-3.00__install-1__pydicom__pydicom-1458.traj"
        ).read_text()
    )
    step = traj["trajectory"][3]
    ext = REG.extract(_item("swe-agent", "{}", step["observation"], action=step["action"]))
    assert ext.kind == "search" and ext.payload["pattern"] == "numpy_handler.py"
    assert ext.payload["root"] == "/pydicom__pydicom" and ext.payload["match_count"] == 3
    assert (
        ext.payload["files"][1] == "/pydicom__pydicom/pydicom/pixel_data_handlers/numpy_handler.py"
    )
    nebius = json.loads((REAL / "adp-nebius-swe-agent/ReviewNB__treon-25_38.json").read_text())
    text = nebius["trajectory"][7]["text"]
    ext = REG.extract(
        _item("swe-agent", "{}", text, action='search_file "def get_notebooks_to_test"')
    )
    assert ext.payload["matches"] == [
        {"path": "/treon/treon/treon.py", "line": 122, "text": "def get_notebooks_to_test(args):"}
    ]
    assert ext.line_range == (1, 3)  # the "(Open file …)" trailer is not evidence


def test_search_dir_format() -> None:
    text = 'Found 5 matches for "Field" in /repo:\n/repo/a.py (3 matches)\n/repo/b.py (2 matches)\nEnd of matches for "Field" in /repo\n'
    p = REG.extract(_item("swe-agent", "{}", text, action="search_dir Field")).payload
    assert (p["match_count"], p["file_count"], p["files"]) == (5, 2, ["/repo/a.py", "/repo/b.py"])


def test_twelve_megabyte_find_is_tiny_and_fast() -> None:
    line = "./var/log/service/instance-{:07d}/output.log\n"
    text = "".join(line.format(i) for i in range(270_000))
    assert len(text) > 12_000_000
    item = _item("Bash", json.dumps({"command": 'find . -name "*.log"'}), text)
    start = time.perf_counter()
    ext = REG.extract(item)
    elapsed = time.perf_counter() - start
    assert elapsed < 5.0
    assert ext.kind == "search"
    assert ext.payload["match_count"] == 270_000 and ext.payload["file_count"] == 270_000
    assert len(ext.payload["files"]) == 20
    assert ext.limits == "first 20 of 270,000 files"
    assert len(json.dumps(ext.payload)) + len(ext.summary) < 4096
    assert needs_artifact_ref(item, ToolOutputBudget())


# --- JSON APIs, subagents, generic -----------------------------------------------------


def test_real_tau_bench_json_payload() -> None:
    data = json.loads((REAL / "tau-bench-airline-gpt4o/task002_trial2_idx102.json").read_text())
    name, args, text = _openai_pairs(data["traj"])[9]
    ext = REG.extract(_item(name, args, text))
    p = ext.payload
    assert ext.kind == "http_json" and ext.freshness_class == FreshnessClass.TIME_BOUNDED
    assert ext.subject_key == "api:get_reservation_details:reservation_id=JG7FMM"
    assert p["key_count"] == 13 and p["keys"][:3] == ["reservation_id", "user_id", "origin"]
    assert p["ids"] == [
        {"path": "reservation_id", "value": "JG7FMM"},
        {"path": "user_id", "value": "omar_davis_3817"},
        {"path": "payment_history.0.payment_id", "value": "credit_card_2929732"},
    ]
    assert p["fields"] == {
        "reservation_id": "JG7FMM",
        "cabin": "business",
        "flights.0.flight_number": "HAT028",
    }
    assert ext.revalidation_tool == "get_reservation_details" and ext.revalidation_args == {
        "reservation_id": "JG7FMM"
    }


def test_real_task_report() -> None:
    name, args, text, _ = _claude_pair(
        "claude-code-viewer-dkimuson/5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl", 22
    )
    ext = REG.extract(_item(name, args, text))
    assert ext.kind == "subagent_report" and ext.shape == Shape.SUMMARY
    assert ext.confidence_basis == ConfidenceBasis.MODEL_WRITTEN
    assert ext.payload["description"] == "Check package configuration"
    assert ext.payload["report_chars"] == len(text.strip())
    assert ext.summary.splitlines()[1] == "Package.json Analysis Summary"


def test_generic_never_returns_whole_payload() -> None:
    body = "".join(f"row {i}: {'x' * 80}\n" for i in range(5000))
    ext = REG.extract(_item("mystery_tool", "{}", body))
    assert ext.kind == "generic"
    dumped = json.dumps(ext.payload) + ext.summary
    assert len(dumped) < 2500
    assert body not in dumped
    assert ext.payload["head"].startswith("row 0:") and ext.payload["tail"].endswith("x\n")
    assert ext.payload["omitted_bytes"] == len(body.encode()) - len(
        ext.payload["head"].encode()
    ) - len(ext.payload["tail"].encode())
    assert f"… {ext.payload['omitted_bytes']:,} bytes omitted …" in ext.summary
    err = REG.extract(
        _item("mystery_tool", "{}", "starting\nfatal: repository not found\n" + body, is_error=True)
    )
    assert "fatal: repository not found" in err.summary and err.error_type == "error"


# --- registry, determinism, budgets, summarizer ----------------------------------------


class _Always:
    name = "always"

    def matches(self, item: ToolInput) -> bool:
        return True

    def extract(self, item: ToolInput) -> Extraction:
        return Extraction(kind="always", summary="one\ntwo\nthree\nfour")


def test_registry_priority_and_caps() -> None:
    reg = ExtractorRegistry()
    reg.register(GenericExtractor(), priority=0)
    reg.register(_Always(), priority=1)
    ext = reg.extract(_item("x", "{}", "data"))
    assert ext.kind == "always" and ext.summary == "one\ntwo\nthree"
    assert (
        default_registry().select(_item("Bash", '{"command": "pytest -q"}', "")).name == "test_run"
    )


def test_determinism_same_input_same_extraction() -> None:
    data = json.loads((REAL / "adp-swe-smith/getmoto__moto.694ce1f4.pr_6055.json").read_text())
    item = _item("bash", '{"command": "pytest"}', data["messages"][57]["content"])
    a = default_registry().extract(item)
    b = default_registry().extract(
        _item("bash", '{"command": "pytest"}', data["messages"][57]["content"])
    )
    assert a == b
    assert json.dumps(a.payload, sort_keys=True) == json.dumps(b.payload, sort_keys=True)


def test_output_budget_per_tool() -> None:
    small = _item("Read", "{}", "x" * 4096)
    big = _item("Read", "{}", "x" * 4097)
    assert not needs_artifact_ref(small, ToolOutputBudget())
    assert needs_artifact_ref(big, ToolOutputBudget())
    budget = ToolOutputBudget(per_tool={"Read": ToolOutputBudget(max_bytes=10_000)})
    assert not needs_artifact_ref(big, budget)
    assert needs_artifact_ref(_item("Read", "{}", "hello " * 50), ToolOutputBudget(max_tokens=10))


def test_summarizer_only_adds_model_summary() -> None:
    item = _item("Bash", '{"command": "ls"}', "a\nb\n")
    ext = REG.extract(item)
    summarizer = ScriptedSummarizer(["Two files listed."])
    text = asyncio.run(summarizer.asummarize(item, ext))
    added = apply_summarizer(ext, text)
    assert added.payload["model_summary"] == "Two files listed."
    assert added.payload["model_summary_basis"] == "model_written"
    assert {
        k: v for k, v in added.payload.items() if not k.startswith("model_summary")
    } == ext.payload
    assert (added.summary, added.confidence, added.confidence_basis, added.line_range) == (
        ext.summary,
        ext.confidence,
        ext.confidence_basis,
        ext.line_range,
    )
    assert summarizer.calls == [("Bash", "command")]
    with pytest.raises(InputError):
        summarizer.summarize(item, ext)
