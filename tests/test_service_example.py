"""``examples/proxy_openai.py`` runs as documented (no network)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "proxy_openai.py"


def test_proxy_example_runs() -> None:
    done = subprocess.run([sys.executable, str(EXAMPLE)], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "Done: the step finished." and lines[1].startswith("assembly asm_")


def test_readme_points_the_sdks_and_claude_code_at_the_service(monkeypatch: pytest.MonkeyPatch) -> None:
    import re

    monkeypatch.setenv("OPENAI_API_KEY", "sk-readme")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-readme")
    readme = (EXAMPLE.parents[1] / "README.md").read_text()
    section = readme[readme.index("## Service and drop-in proxy"):]
    assert re.search(r"```sh\ncontextledger serve ", section)
    blocks = re.findall(r"```python\n(.*?)```", section, flags=re.S)[:2]
    clients = []
    for block in blocks:  # each snippet builds its client (no request is made)
        namespace: dict[str, object] = {}
        exec(compile(block, "README.md", "exec"), namespace)
        clients.append(namespace["client"])
    assert [str(c.base_url).rstrip("/") for c in clients] == ["http://127.0.0.1:8787/v1", "http://127.0.0.1:8787"]  # type: ignore[attr-defined]
    assert "ANTHROPIC_BASE_URL=http://127.0.0.1:8787 claude" in section
