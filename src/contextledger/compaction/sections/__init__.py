"""Deterministic builders of each handoff section from runtime-graph records.

Every function here is pure: records in, JSON-serialisable section out, ordered by
``(seq, id)`` — no clock except the explicit ``now``, no randomness, no dependence on dict
order.  Which records feed which section (seed 001 §10, §6 problem 5):

* ``user_goal``: the first user chat message of the lineage in the user's own words
  (injected text removed), verbatim (capped), plus the later user requests inside the
  covered range;
* ``hard_constraints``: see :func:`.constraints.hard_constraints`;
* ``current_state``: the last covered unit, unresolved calls, latest checkpoint and skill
  state;
* ``verified_facts``: current memories (not stale at ``now``, not superseded, not failed)
  other than file reads/writes, with their memory and artifact ids;
* ``files_read`` / ``files_modified``: file-read and applied file-write memories by path;
* ``failed_attempts``: failed/abandoned calls, rejected writes, commands that failed;
* ``latest_verification``: the newest test run, else the newest command with an exit code;
* ``next_step``: the newest user request of the lineage (covered or in the raw tail), with
  the final sentence (code fences skipped) of the last covered assistant text as its
  plan when no covered request came after that text;

Only records another participant may see feed a section: branch/conversation visibility,
not ``not_promoted``/``audit_only``, privacy class ``public``/``internal``/``user_data``
(seed 000 §4.9, §8 R3, R11) — the compaction message is branch-visible.

One module a section (:mod:`.goal`, :mod:`.constraints`, :mod:`.state`, :mod:`.facts`,
:mod:`.files` for both file sections, :mod:`.failures`, :mod:`.verification`,
:mod:`.next_step`); :mod:`.common` holds what they share.
"""
