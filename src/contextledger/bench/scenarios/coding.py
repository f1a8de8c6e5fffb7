"""Seed 001 §5 — the coding-agent walk-through (read → test → edit → retest).

The login-redirect bug: the agent lists the project, reads ``package.json`` and the route
guard, runs the tests (one failure), reads the project rules, runs a ``find`` whose output
is 12 MB, edits the guard and reruns the tests.  After the edit the pre-edit read is stale
(its removed line must not be presented as current code); the user's "don't change the
public API" survives; the 12 MB output is an artifact reference, never raw; the project
rule ("never use npm") beats the user's soft preference for npm (seed 001 §4.2 authority).

The project rules reach the ledger the way an integration loads them:
:meth:`~contextledger.ledger.Ledger.load_project_rules` on the checkout (project
authority, rendered in the system slot).  The agent also reads ``AGENTS.md`` with a
tool; that copy is tool output — untrusted data — and never becomes a rule.

Note: the raw ``find`` output alone is 12 MB, so this case's replay is far above the
900–2,100-token sizing of the seed scenarios; that is the point of the case.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from contextledger.bench.probes import Fact
from contextledger.bench.scenarios.base import T0, BuiltCase, Scenario, Script, filler_tokens
from contextledger.handles import artifact_handle
from contextledger.ledger import Ledger

__all__ = ["CODING_WALKTHROUGH"]

_GUARD_OLD = """import { Router } from "./router";
import { session } from "../state/session";

export function requireAuth(router: Router, next: string): string {
  if (!session.user) {
    return "/login?next=" + encodeURIComponent(next);
  }
  return redirectTarget(next);
}

function redirectTarget(next: string): string {
  return "/home"; // BUG: ignores next after sign-in
}
"""

_AGENTS_MD = "# Project rules\n- Use pnpm for every script; never use npm in this repo.\n- Keep exported function signatures in src/auth stable.\n"

_BIG_FIND_BYTES = 12 * 1024 * 1024


def _find_output() -> str:
    lines: list[str] = []
    size = 0
    i = 0
    while size < _BIG_FIND_BYTES:
        line = f"./node_modules/.cache/babel-loader/{i:07d}-{(i * 2654435761) % 10**8:08d}.json"
        lines.append(line)
        size += len(line) + 1
        i += 1
    return "\n".join(lines)


def _build(ledger: Ledger, scale: int) -> BuiltCase:
    s = Script(ledger, title="login redirect", system_prompt="You are a coding agent working in the user's repository.", seed="coding-walkthrough")
    s.user("Login redirect fails after sign-in; find the cause and fix it. Don't change the public API of src/auth.")
    s.user("I'd prefer you use npm for scripts if that's quicker.")
    s.call("Bash", {"command": "ls"}, "AGENTS.md\npackage.json\npnpm-lock.yaml\nsrc\ntests\ntsconfig.json")
    # the integration loads the project's rule files from the checkout (trusted, project
    # authority); the agent's own Read of AGENTS.md below is tool output (untrusted data)
    with tempfile.TemporaryDirectory(prefix="coding-walkthrough-") as checkout:
        (Path(checkout) / "AGENTS.md").write_text(_AGENTS_MD, encoding="utf-8")
        ledger.load_project_rules(s.id, checkout)
    s.call("Read", {"file_path": "AGENTS.md"}, _AGENTS_MD)
    s.call("Read", {"file_path": "package.json"}, json.dumps({"name": "webapp", "scripts": {"test": "vitest run", "build": "tsc -p ."}, "dependencies": {"react": "18.3.1"}}, indent=2))
    s.filler(filler_tokens(scale, 200, 1500))
    s.call("Grep", {"pattern": "redirect", "path": "src"}, "src/auth/guard.ts:7:  return redirectTarget(next);\nsrc/auth/guard.ts:11:function redirectTarget(next: string): string {\nsrc/pages/login.tsx:22:  router.go(requireAuth(router, next));")
    s.call("Read", {"file_path": "src/auth/guard.ts"}, _GUARD_OLD)
    s.call(
        "Bash", {"command": "pnpm test"},
        "FAIL tests/auth.test.ts > redirects to next after sign-in\nAssertionError: expected '/home' to be '/settings'\n 1 failed | 11 passed",
        is_error=True,
    )
    s.call("Bash", {"command": "find . -name '*.json'"}, _find_output())
    # the payload cites an artifact by its per-conversation handle ("[artifact a19, 12,582,920
    # bytes]"), never by its random id: the reference a model can pass to rehydrate
    find_artifact = f"[artifact {artifact_handle(ledger.store.get_artifact(ledger.scope(), s.last_artifact_id))}, "
    s.call(
        "Edit",
        {"file_path": "src/auth/guard.ts", "old_string": '  return "/home"; // BUG: ignores next after sign-in', "new_string": '  return next.startsWith("/") ? next : "/home";'},
        "The file src/auth/guard.ts has been updated.",
    )
    s.call("Bash", {"command": "pnpm test"}, " ✓ tests/auth.test.ts (12 tests)\n 12 passed")
    s.user("Good. Now also add a test for an external next URL.")
    return BuiltCase(
        conversation_id=s.id, branch_id=None, participant_id=None, provider="anthropic", budget_tokens=1200,
        now=T0.replace(hour=11),
        must_see=(
            Fact("Don't change the public API of src/auth", "user constraint survives compaction"),
            Fact("never use npm", "project rule"),
            Fact('return next.startsWith("/") ? next : "/home";', "the current code (the edit)"),
            Fact("12 passed", "latest test result"),
            Fact(find_artifact, "the 12 MB find output as an artifact reference"),
            Fact("add a test for an external next URL", "current request"),
        ),
        must_not_see=(
            Fact('return "/home"; // BUG: ignores next after sign-in', "pre-edit code presented as current", outside_call_arguments=True),
            Fact("./node_modules/.cache/babel-loader/0004242-", "raw 12 MB find output"),
            Fact("1 failed | 11 passed", "the pre-edit test run's raw output shown next to the passing retest (its error line may stay, marked superseded)"),
        ),
    )


CODING_WALKTHROUGH = Scenario(name="coding-walkthrough", title="coding agent: read, test, edit, retest", source="seed 001 §5", seed_scenario=False, build=_build)
