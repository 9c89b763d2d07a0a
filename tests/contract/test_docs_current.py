"""The generated reference pages of docs/ (``docs/checks.md``: the check catalog; ``docs/config.md``:
every ``datacheck.toml`` key) are what ``docs/gen_reference.py`` makes from the code now: a check ID
or a config key added, removed or changed without regenerating them fails here."""
from __future__ import annotations

import importlib.util
import re

from conftest import ROOT

from datacheck.model.catalog import CATALOG
from datacheck.model.config import Config


def _generator():
    spec = importlib.util.spec_from_file_location("gen_reference", ROOT / "docs" / "gen_reference.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_generated_pages_are_current():
    gen = _generator()
    for path, make in gen.PAGES.items():
        assert path.read_text(encoding="utf-8") == make(), (
            f"{path.relative_to(ROOT)} is stale: run `python docs/gen_reference.py` and commit the result")


def test_every_check_id_and_config_key_is_on_its_page():
    checks = (ROOT / "docs" / "checks.md").read_text(encoding="utf-8")
    assert [cid for cid in CATALOG if f"| `{cid}` |" not in checks] == []
    config = (ROOT / "docs" / "config.md").read_text(encoding="utf-8")
    for section, field in Config.model_fields.items():
        assert f"## `[{section}]`" in config
        model = field.annotation
        for name, sub in getattr(model, "model_fields", {}).items():
            assert f"| `{sub.alias or name}` |" in config, f"[{section}] {name}"


_LINK = re.compile(r"\]\(([^)\s]+)\)")


def _anchors(text: str) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation other than ``-``/``_`` dropped, spaces as ``-``."""
    return {re.sub(r"[^\w\- ]", "", line.lstrip("#").strip().lower()).replace(" ", "-")
            for line in text.splitlines() if line.startswith("#")}


def test_relative_links_of_readme_and_docs_resolve():
    broken = []
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for target in _LINK.findall(page.read_text(encoding="utf-8")):
            if "://" in target:
                continue
            file, _, anchor = target.partition("#")
            dest = (page.parent / file).resolve() if file else page
            if not dest.is_file():
                broken.append(f"{page.name}: {target} (no file)")
            elif anchor and anchor not in _anchors(dest.read_text(encoding="utf-8")):
                broken.append(f"{page.name}: {target} (no heading)")
    assert broken == []


def _setup_commands() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("\n## Set-up", 1)[1].split("\n## ", 1)[0]
    block = section.split("```bash\n", 1)[1].split("```", 1)[0]
    return [line for line in block.splitlines() if line.strip()]


def test_setup_commands_work_in_a_new_terminal():
    """The README's two set-up commands need no active virtual environment and no ``python`` on PATH:
    every command is ``python3`` or a program of ``.venv/bin``; the second runs the test suite."""
    lines = _setup_commands()
    assert len(lines) == 2, lines
    for line in lines:
        for command in line.split("&&"):
            program = command.split()[0]
            assert program == "python3" or program.startswith(".venv/bin/"), command
    assert lines[0].startswith("python3 -m venv .venv") and ".venv/bin/datacheck audit sample_data/" in lines[0]
    assert lines[1].startswith(".venv/bin/python -m pytest")
