"""Generated files: a durable file handle (id, name, mime type, size, hash).

Seed 000 §2.2 / §4.7: a generated file's handle is durable operational state, not a
passing observation, so it gets freshness class ``durable``.

Recognised: a result announcing a created file (``File created successfully at: X`` from
Claude Code ``Write`` and OpenHands ``str_replace_editor create``), SWE-agent ``create X``,
and JSON results that describe a file (``file_id`` / ``fileId`` plus a name).

Recognised also: a ``write`` of the tool registry whose result does not say it replaced
an existing file (Gemini CLI ``write_file`` of a new file, declared tools).

Payload keys: ``file`` = ``{"id", "name", "path", "mime_type", "size_bytes",
"content_sha256"}`` (size and hash are None when the content is not in the call), plus
``path`` and ``operation``, and when the call carries the content ``new_text`` (its first
lines within the :class:`~contextledger.memory.extractors.file_write.ChangeLimits`),
``new_text_lines`` and ``new_text_omitted``.  The media type comes from a fixed extension table
(:data:`MIME_TYPES`), never from the host's ``mimetypes`` database, so extraction is
identical on every machine.
"""

from __future__ import annotations

import posixpath
import re
from typing import Any

from contextledger.limits import loads_json
from contextledger.memory.extractors.actions import resolve_action
from contextledger.memory.extractors.base import Extraction, ToolInput
from contextledger.memory.extractors.file_write import (
    ChangeLimits,
    bound_lines,
    looks_like_patch,
    overwrote_existing,
)
from contextledger.memory.extractors.textutil import (
    body_ranges,
    byte_len,
    fmt_int,
    normalise_path,
    sha256_text,
    unwrap,
)
from contextledger.records.enums import ConfidenceBasis, ContextKind, FreshnessClass, Shape

__all__ = ["MIME_TYPES", "GeneratedFileExtractor", "mime_type_for"]

MIME_TYPES: dict[str, str] = {
    ".py": "text/x-python",
    ".js": "text/javascript",
    ".mjs": "text/javascript",
    ".ts": "text/x-typescript",
    ".tsx": "text/x-typescript",
    ".jsx": "text/javascript",
    ".json": "application/json",
    ".md": "text/markdown",
    ".txt": "text/plain",
    ".csv": "text/csv",
    ".html": "text/html",
    ".css": "text/css",
    ".go": "text/x-go",
    ".rs": "text/x-rust",
    ".toml": "application/toml",
    ".yaml": "application/yaml",
    ".yml": "application/yaml",
    ".sh": "application/x-sh",
    ".pl": "text/x-perl",
    ".xml": "application/xml",
    ".pdf": "application/pdf",
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".svg": "image/svg+xml",
    ".docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    ".xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    ".pptx": "application/vnd.openxmlformats-officedocument.presentationml.presentation",
}
"""Extension → media type; unknown extensions are ``application/octet-stream``."""

_CREATED = re.compile(r"File created successfully at: (\S.*?)\s*$", re.M)
_SWE_HEADER = re.compile(r"^\[File: (.+?) \((\d+) lines total\)\]$", re.M)


def mime_type_for(name: str) -> str:
    """Media type of a file name from :data:`MIME_TYPES`."""
    ext = posixpath.splitext(name.lower())[1]
    return MIME_TYPES.get(ext, "application/octet-stream")


def _json_file(text: str, *, path_names: bool = False) -> dict[str, Any] | None:
    """The JSON object ``text`` holds when it describes a file: a ``file_id`` / ``fileId``
    plus a name (``filename`` / ``name`` / ``file_name``; with ``path_names`` a ``path``
    names it too — the result of a registry ``write``, e.g. ``{"file_id", "path"}``)."""
    stripped = text.strip()
    if not stripped.startswith("{"):
        return None
    try:
        obj = loads_json(stripped)
    except ValueError:
        return None
    if not isinstance(obj, dict):
        return None
    file_id = obj.get("file_id", obj.get("fileId"))
    name = obj.get("filename", obj.get("name", obj.get("file_name")))
    if path_names and name is None:
        name = obj.get("path")
    if isinstance(file_id, str) and isinstance(name, str):
        return obj
    return None


def _new_text(content: str, limits: ChangeLimits) -> dict[str, Any]:
    lines = content.splitlines()
    kept, omitted = bound_lines(lines, limits) if not looks_like_patch(lines) else ([], len(lines))
    return {"new_text": "\n".join(kept) if kept else None, "new_text_lines": len(lines), "new_text_omitted": omitted}


class GeneratedFileExtractor:
    """Extractor for results that announce a newly created file."""

    name = "generated_file"

    def __init__(self, limits: ChangeLimits | None = None) -> None:
        self.limits = limits or ChangeLimits()

    def matches(self, item: ToolInput) -> bool:
        """True when the result announces a created file or describes a file handle."""
        if item.is_error:
            return False
        action = resolve_action(item)
        head = item.result_text[:2000]
        if action.verb == "create":
            # SWE-agent ``create X`` answers with the new (often empty) file's header,
            # or with nothing at all when called as a function; a write that replaced
            # an existing file is an edit (file_write)
            if overwrote_existing(item):
                return False
            return bool(_CREATED.search(head)) or bool(_SWE_HEADER.search(head)) or bool(action.path)
        return (
            action.verb == "other"
            and _json_file(head if len(item.result_text) <= 2000 else "") is not None
        )

    def extract(self, item: ToolInput) -> Extraction:
        """The file-handle extract of ``item`` (freshness ``durable``)."""
        action = resolve_action(item)
        args = item.arguments or {}
        body = unwrap(item.result_text)
        # a write whose result names the file it made (``{"file_id": …, "path": …}``)
        # keeps that handle: the id is how later calls refer to the file
        meta = _json_file(body.text, path_names=action.verb == "create") if action.verb in ("other", "create") else None
        content = action.content if action.content is not None else args.get("content", args.get("file_text"))
        size: int | None = None
        digest: str | None = None
        if meta is not None:
            path = normalise_path(str(meta.get("path", meta.get("filename", meta.get("name", "")))))
            name = str(
                meta.get(
                    "filename", meta.get("name", meta.get("file_name", posixpath.basename(path)))
                )
            )
            file_id = str(meta.get("file_id", meta.get("fileId")))
            mime = meta.get("mime_type", meta.get("mimeType"))
            mime_type = mime if isinstance(mime, str) else mime_type_for(name)
            raw_size = meta.get("size_bytes", meta.get("size", meta.get("bytes")))
            size = raw_size if isinstance(raw_size, int) else None
            raw_hash = meta.get("sha256")
            digest = (
                f"sha256:{raw_hash}"
                if isinstance(raw_hash, str) and ":" not in raw_hash
                else (raw_hash if isinstance(raw_hash, str) else None)
            )
        else:
            created = _CREATED.search(body.text)
            swe = _SWE_HEADER.search(body.text)
            path = normalise_path(
                created.group(1) if created else (swe.group(1) if swe else (action.path or ""))
            )
            name = posixpath.basename(path)
            file_id = f"file:{path}"
            mime_type = mime_type_for(name)
            if isinstance(content, str):
                size = byte_len(content)
                digest = sha256_text(content)
            elif swe and swe.group(2) == "1" and body.text.rstrip().endswith("1:"):
                size, digest = 0, sha256_text("")
        handle = {
            "id": file_id,
            "name": name,
            "path": path,
            "mime_type": mime_type,
            "size_bytes": size,
            "content_sha256": digest,
        }
        payload: dict[str, Any] = {
            "path": path,
            "operation": action.sub or "create",
            "file": handle,
        }
        if isinstance(content, str) and meta is None:
            payload.update(_new_text(content, self.limits))
        size_text = f"{fmt_int(size)} bytes" if size is not None else "size unknown"
        summary = f"created {path}" + (f" · {file_id}" if meta is not None else "") + f" · {mime_type} · {size_text}"
        if digest:
            summary += f" · {digest[:19]}"
        prov_lines, prov_bytes = body_ranges(item.result_text, body)
        return Extraction(
            kind="generated_file",
            summary=summary,
            payload=payload,
            shape=Shape.REFERENCE,
            context_kind=ContextKind.OPERATIONAL,
            freshness_class=FreshnessClass.DURABLE,
            subject_key=f"file:{path}" if path else None,
            revalidation_tool=None,
            revalidation_args={},
            confidence=1.0,
            confidence_basis=ConfidenceBasis.DETERMINISTIC_PARSE,
            limits=(f"{payload['new_text_omitted']} more lines in the recorded call" if payload.get("new_text_omitted") else None) if digest else "content not in the call; size and hash unknown",
            error_type=None,
            line_range=prov_lines,
            byte_range=prov_bytes,
        )
