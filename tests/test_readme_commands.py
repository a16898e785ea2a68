"""The README's commands work as written in a new shell (no uv on PATH, no activated venv)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def _planact_commands() -> list[str]:
    """The planact subcommands the README tells a person to run."""
    return sorted(set(re.findall(r"`\.venv/bin/planact (\w+)", README)))


def test_the_readme_runs_planact_from_the_venv_not_through_uv() -> None:
    assert _planact_commands(), "the README names no .venv/bin/planact command"
    table = README[README.index("| what | how |") :].split("\n\n", 1)[0]
    assert "uv run" not in table, "a new shell may not have uv on its PATH"


def test_each_readme_command_starts_in_a_shell_without_uv_on_path() -> None:
    venv_planact = Path(sys.executable).with_name("planact")
    assert venv_planact.exists(), "the project is installed into the venv (make setup)"
    # a new login shell: system PATH only, nothing exported by make or uv
    env = {"PATH": "/usr/bin:/bin", "HOME": str(Path.home()), "LANG": "C.UTF-8"}
    for command in _planact_commands():
        proc = subprocess.run(
            ["sh", "-c", f".venv/bin/planact {command} --help"],
            cwd=venv_planact.parents[2],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 0, (command, proc.stderr)
        assert "usage:" in proc.stdout


def _first_sh_block_after(text: str, heading: str) -> str:
    after = text[text.index(heading) :]
    return after.split("```sh\n", 1)[1].split("```", 1)[0]


def test_the_compose_quick_starts_say_how_to_build_behind_a_tls_proxy() -> None:
    """Offline behind a re-signing proxy the build stops at "No matching distribution found
    for uv==…" unless EXTRA_CA_CERTS is exported: the quick start says so where a person
    reads it, before `docker compose up`, not only under "Without an image registry"."""
    deploy = (ROOT / "docs" / "deploy.md").read_text(encoding="utf-8")
    blocks = {
        "README.md ## Deployment": _first_sh_block_after(README, "## Deployment"),
        "docs/deploy.md ## Quick start": _first_sh_block_after(deploy, "## Quick start"),
    }
    for where, block in blocks.items():
        assert "docker compose up" in block, where
        assert "export EXTRA_CA_CERTS=" in block, where
        assert block.index("EXTRA_CA_CERTS") < block.index("docker compose up"), where
    quick = deploy[deploy.index("## Quick start") : deploy.index("## Without an image registry")]
    assert "No matching distribution found for uv==" in quick
    # the variable the docs name is the one Compose hands to the build
    compose = (ROOT / "docker-compose.yml").read_text(encoding="utf-8")
    assert "EXTRA_CA_CERTS: ${EXTRA_CA_CERTS:-}" in compose
