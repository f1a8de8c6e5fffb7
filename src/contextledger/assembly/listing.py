"""The working-set list left out when it adds nothing (policy ``[working_set] when_needed``).

The list (:mod:`.working_set`) says each file's path and state so that they survive once
the raw exchanges are dropped; when every listed file's newest exchange is in the request
raw, the list only repeats it, and a small session sent whole would cost more than its
replay (issue "What a new user found", item 9).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from contextledger.assembly.budget import Selection

__all__ = ["without_redundant_listing"]


def without_redundant_listing(selection: Selection) -> Selection:
    """``selection`` without its working-set list when the list tells nothing the request
    does not show: it names every file in play and the newest exchange of each is sent
    raw (not as a memory, a stale marker or an excerpt), so each file's path and state are
    read there.  A small session sent whole is then its replay (issue "What a new user
    found", item 9); a list that counts older files, or any file whose newest exchange is
    not raw, keeps the whole list."""
    raw = {a for p in selection.chosen if not p.stale and not p.working_set for a in p.raw_artifacts}
    listing = next((p for p in selection.chosen if p.working_set), None)
    if listing is None or not listing.file_artifacts or not all(any(a in raw for a in arts) for arts in listing.file_artifacts):
        return selection
    drop = {id(m) for m in listing.messages}
    request = replace(selection.request, messages=tuple(m for m in selection.request.messages if id(m) not in drop))
    return replace(selection, chosen=[p for p in selection.chosen if p is not listing], request=request)
