"""Stack-frame folding in failed calls' memories (seed 000 §4.5–4.6: the error line is
recovery state, stack noise is not)."""

from __future__ import annotations

import json

from contextledger.memory.extractors import ToolInput, default_registry
from contextledger.memory.extractors.errorscan import fold_stack_frames, frame_marker

PY_TRACE = """Traceback (most recent call last):
  File "/app/main.py", line 12, in <module>
    main()
  File "/app/main.py", line 8, in main
    load(cfg)
  File "/app/loader.py", line 40, in load
    raise ValueError(f"bad key: {k}")
           ^^^^^^^^^^^^^^^^^^^^^^^^^^
ValueError: bad key: region"""

PY_CHAINED = """Traceback (most recent call last):
  File "/app/db.py", line 5, in connect
    sock.connect(addr)
ConnectionRefusedError: [Errno 111] Connection refused

During handling of the above exception, another exception occurred:

Traceback (most recent call last):
  File "/app/main.py", line 3, in <module>
    connect()
  File "/app/db.py", line 7, in connect
    raise DatabaseDown("primary unreachable")
app.errors.DatabaseDown: primary unreachable"""

JS_TRACE = """Error: connect ECONNREFUSED 127.0.0.1:5432
    at TCPConnectWrap.afterConnect [as oncomplete] (node:net:1555:16)
    at async Pool.connect (node_modules/pg-pool/index.js:45:11)
    at Object.<anonymous> (/srv/app/db.js:10:3)
    at new Promise (<anonymous>)
Node.js v20.11.0"""

JAVA_TRACE = """Exception in thread "main" java.lang.IllegalStateException: pool exhausted
\tat com.acme.db.Pool.take(Pool.java:88)
\tat com.acme.App.main(App.java:21)
Caused by: java.net.SocketTimeoutException: connect timed out
\tat java.base/java.net.Socket.connect(Socket.java:633)
\tat jdk.internal.reflect.NativeMethodAccessorImpl.invoke0(Native Method)
\tat com.acme.db.Pool.open(Pool.java:120)
\t... 2 more"""

GO_TRACE = """panic: runtime error: index out of range [3] with length 3

goroutine 1 [running]:
main.lookup(...)
\t/home/u/app/main.go:14
main.main()
\t/home/u/app/main.go:9 +0x1d
exit status 2"""

RUST_TRACE = """thread 'main' panicked at src/main.rs:4:5:
index out of bounds: the len is 3 but the index is 7
stack backtrace:
   0: rust_begin_unwind
             at /rustc/90b35a62/library/std/src/panicking.rs:645:5
   1: core::panicking::panic_fmt
   2: app::main
             at ./src/main.rs:4:5
note: Some details are omitted, run with `RUST_BACKTRACE=full` for a verbose backtrace."""


def _fold(text: str) -> tuple[list[str], int]:
    return fold_stack_frames(text.split("\n"))


def test_python_traceback_keeps_only_the_exception_line() -> None:
    assert _fold(PY_TRACE) == (["[3 stack frames omitted]", "ValueError: bad key: region"], 3)


def test_python_chained_exceptions_keep_every_exception_and_the_chaining_line() -> None:
    assert _fold(PY_CHAINED) == (
        [
            "[1 stack frame omitted]",
            "ConnectionRefusedError: [Errno 111] Connection refused",
            "",
            "During handling of the above exception, another exception occurred:",
            "",
            "[2 stack frames omitted]",
            "app.errors.DatabaseDown: primary unreachable",
        ],
        3,
    )


def test_javascript_frames_fold_and_the_final_message_stays() -> None:
    assert _fold(JS_TRACE) == (
        ["Error: connect ECONNREFUSED 127.0.0.1:5432", "[4 stack frames omitted]", "Node.js v20.11.0"],
        4,
    )


def test_java_frames_fold_per_cause() -> None:
    assert _fold(JAVA_TRACE) == (
        [
            'Exception in thread "main" java.lang.IllegalStateException: pool exhausted',
            "[2 stack frames omitted]",
            "Caused by: java.net.SocketTimeoutException: connect timed out",
            "[3 stack frames omitted]",
        ],
        5,
    )


def test_go_and_rust_traces() -> None:
    assert _fold(GO_TRACE) == (
        ["panic: runtime error: index out of range [3] with length 3", "", "[2 stack frames omitted]", "exit status 2"],
        2,
    )
    assert _fold(RUST_TRACE) == (
        [
            "thread 'main' panicked at src/main.rs:4:5:",
            "index out of bounds: the len is 3 but the index is 7",
            "[3 stack frames omitted]",
            "note: Some details are omitted, run with `RUST_BACKTRACE=full` for a verbose backtrace.",
        ],
        3,
    )


def test_lines_that_only_look_like_frames_are_kept() -> None:
    text = "Meeting notes:\n    at noon we ship\n  1: first item\nTraceback (most recent call last):\nsomething else"
    assert _fold(text) == (text.split("\n"), 0)
    assert frame_marker(1) == "[1 stack frame omitted]"


def _item(tool: str, args: dict[str, str], text: str, *, is_error: bool) -> ToolInput:
    return ToolInput(tool_name=tool, arguments_json=json.dumps(args), result_text=text, is_error=is_error, size_bytes=len(text.encode()))


MIGRATION = "Applying 0041_users ... ok\nApplying 0042_add_index ...\nERROR: migration 0042_add_index failed: lock timeout on table orders\n" + "\n".join(
    f"    at Pool.query (node_modules/pg/lib/pool.js:{40 + i}:{i})" for i in range(14)
)


def test_failed_unknown_tool_memory_keeps_the_error_line_not_the_frames() -> None:
    ext = default_registry().extract(_item("run_migrations", {"env": "staging"}, MIGRATION, is_error=True))
    assert ext.kind == "generic"
    assert ext.summary == (
        "Applying 0041_users ... ok\n"
        "ERROR: migration 0042_add_index failed: lock timeout on table orders\n"
        "[14 stack frames omitted]"
    )
    assert (ext.payload["stack_frames_folded"], ext.payload["omitted_bytes"], ext.payload["line_count"], ext.payload["tail"]) == (14, 0, 17, "")
    assert "pool.js" not in json.dumps(ext.payload)
    ok = default_registry().extract(_item("run_migrations", {"env": "staging"}, MIGRATION, is_error=False))
    assert ok.payload["stack_frames_folded"] == 0 and "pool.js:53:13" in ok.payload["tail"]


def test_failed_command_memory_folds_frames_in_head_and_tail() -> None:
    out = "collecting config\n" + PY_TRACE + "\nExit code 1"
    ext = default_registry().extract(_item("Bash", {"command": "python main.py"}, out, is_error=True))
    assert ext.kind == "command"
    assert ext.summary == "$ python main.py → exit 1 (ValueError) · 11 lines\nValueError: bad key: region"
    assert (ext.payload["head"], ext.payload["tail"]) == (
        ["collecting config", "[3 stack frames omitted]", "ValueError: bad key: region", "Exit code 1"],
        [],
    )
    assert ext.payload["stack_frames_folded"] == 3
    assert ext.limits == "3 stack frames folded"
