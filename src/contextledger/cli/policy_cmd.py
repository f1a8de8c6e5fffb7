"""``contextledger policy show | validate | diff``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from contextledger.cli.common import console, emit_error, emit_json, fail_cleanly

app = typer.Typer(rich_markup_mode=None, help="Show, validate and compare assembly policies (TOML).", no_args_is_help=True)

JsonOpt = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON.")]


def _load(path: Path | None):  # type: ignore[no-untyped-def]
    from contextledger.policy.loader import default_policy, load_policy

    return default_policy() if path is None else load_policy(path)


@app.command("show")
def show(
    path: Annotated[Path | None, typer.Argument(help="Policy file (default: the bundled policy).", readable=False)] = None,
    as_json: JsonOpt = False,
) -> None:
    """Print a policy with its computed version."""
    from contextledger.policy.diff import policy_to_toml

    with fail_cleanly(as_json):
        pol = _load(path)
    if as_json:
        emit_json({"version": pol.version, "policy": pol.model_dump(mode="json")})
    else:
        console.print(policy_to_toml(pol), markup=False, soft_wrap=True)  # opens with "# version: …"


@app.command("validate")
def validate(path: Annotated[Path, typer.Argument(help="Policy file to check.", readable=False)], as_json: JsonOpt = False) -> None:
    """Check a policy file; every error on its own line, naming its key path (e.g.
    budget.buckets.recent_tail)."""
    from contextledger.errors import PolicyError

    with fail_cleanly(as_json):
        try:
            pol = _load(path)
        except PolicyError as exc:
            if not exc.problems:
                raise
            codes = [emit_error(PolicyError(reason, key, exc.source), as_json, key_path=key) for key, reason in exc.problems]
            raise typer.Exit(max(codes)) from None
    if as_json:
        emit_json({"valid": True, "version": pol.version})
    else:
        console.print(f"valid: {path} (version {pol.version})", markup=False)


@app.command("diff")
def diff(
    a: Annotated[Path, typer.Argument(help="First policy file.", readable=False)],
    b: Annotated[Path, typer.Argument(help="Second policy file.", readable=False)],
    as_json: JsonOpt = False,
) -> None:
    """List the keys whose values differ between two policies."""
    from contextledger.policy.diff import policy_diff, render_diff

    with fail_cleanly(as_json):
        pa, pb = _load(a), _load(b)
        changes = policy_diff(pa, pb)
    if as_json:
        emit_json({"a": pa.version, "b": pb.version, "changes": [c.model_dump(mode="json") for c in changes]})
    else:
        console.print(render_diff(changes) if changes else "no differences", markup=False)
