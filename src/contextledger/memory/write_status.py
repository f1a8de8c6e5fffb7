"""The status of a file write, edit or read comes from its result (seed 000 §4.6: a
failed call is recovery state; §4.5: only an applied write changes a file, only a
successful result is a read).

A write / edit / patch / create call failed when its result says so: the error flag, or
the tool's own failure text — Claude Code's ``<tool_use_error>``, ``Error: …`` /
``ERROR: …`` / ``Failed to edit …`` / ``apply_patch verification failed: …`` leads,
``No replacement was performed``, ``String to replace not found`` … (the first non-empty
line of the result, and the rejection phrases of
:data:`~contextledger.memory.extractors.write_failures.REJECTED` near its start).  A failed
write changes nothing: it is never a write of its file (no earlier read goes stale).
A read failed when its result is the reader's own error line (``cat: x: No such file or
directory``, for any shell tool, known or not) or a read tool's ``Error: …``.  Other
shell commands keep their own status (exit codes), never read from their output here.
"""

from __future__ import annotations

from contextledger.memory.extractors.actions import is_shell_read, resolve_action
from contextledger.memory.extractors.base import ToolInput
from contextledger.memory.extractors.write_failures import read_failed, write_failed
from contextledger.records.enums import ToolCallStatus

__all__ = ["result_status", "write_failed"]


def result_status(tool_name: str, arguments_json: str, text: str | None, is_error: bool, action_text: str | None = None) -> ToolCallStatus:
    """``FAILED`` when the result is flagged as an error, when a (non-shell) write, edit,
    patch or create call's result ``text`` is a failure text (:func:`write_failed`), or
    when a file read's is its failure (:func:`~contextledger.memory.extractors.
    write_failures.read_failed`: only a successful result is a read); else
    ``SUCCEEDED``.  ``action_text`` is the command a text-action agent typed (SWE-agent
    ``open a.py``, ``cat a.py``): the call is read as that command, as its memory is.
    Linear in the text's size."""
    if is_error:
        return ToolCallStatus.FAILED
    if text is None:
        return ToolCallStatus.SUCCEEDED
    item = ToolInput(tool_name=tool_name, arguments_json=arguments_json, result_text=text, is_error=False, size_bytes=len(text), action_text=action_text)
    action = resolve_action(item)
    if action.verb in ("write", "create") and action.sub != "shell" and write_failed(text):
        return ToolCallStatus.FAILED
    if action.verb == "read" and read_failed(text, shell=is_shell_read(action)):
        return ToolCallStatus.FAILED  # only a successful result is a read
    return ToolCallStatus.SUCCEEDED
