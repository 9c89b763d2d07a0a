"""The PyPI name ``datacheck`` belongs to another project: neither the workflows, nor any message of
the package, nor the README and docs/ may tell users to install datacheck from PyPI (``pip install datacheck``,
``"datacheck[extra]"``, ``datacheck==X``, ``pip install -U datacheck``)."""
from __future__ import annotations

import re

import yaml
from conftest import ROOT

_PYPI_DATACHECK = re.compile(r"""pip\s+install\s+(?:-U\s+|--upgrade\s+)?["']?datacheck(?:\[|==|>=|["'\s)]|$)""")


def _install_steps(wf: dict) -> list[str]:
    return [s["run"] for job in wf["jobs"].values() for s in job.get("steps", [])
            if "run" in s and "pip install" in s["run"]]


def test_workflows_install_the_vendored_source():
    for path in sorted((ROOT / "workflows").glob("*.yml")):
        text = path.read_text()
        wf = yaml.safe_load(text)
        assert wf["env"]["DATACHECK_SOURCE"] == "tools/datacheck", path.name
        assert "DATACHECK_SPEC" not in text and "datacheck==" not in text
        steps = _install_steps(wf)
        assert steps, path.name
        for run in steps:
            assert 'python -m pip install "./$DATACHECK_SOURCE"' in run
            assert '"$DATACHECK_SOURCE/pyproject.toml"' in run  # a clear error when the source is missing
        head = text.split("\nname:")[0]  # the comment at the top documents it
        assert "DATACHECK_SOURCE (default tools/datacheck" in head and "never" in head and "PyPI" in head


def test_no_message_installs_datacheck_from_pypi():
    offenders = []
    for path in (sorted((ROOT / "datacheck").rglob("*.py")) + sorted((ROOT / "workflows").glob("*.yml"))
                 + [ROOT / "README.md"] + sorted((ROOT / "docs").glob("*.md"))):
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if _PYPI_DATACHECK.search(line):
                offenders.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert offenders == []


def test_pattern_catches_the_old_spellings():
    for bad in ('pip install "datacheck[tokenizers]"', "pip install -U datacheck)", 'pip install "datacheck==0.1.0"',
                "pip install datacheck"):
        assert _PYPI_DATACHECK.search(bad), bad
    for ok in ('pip install "tokenizers>=0.15"', 'pip install -e ".[tokenizers]"', 'pip install "./tools/datacheck"'):
        assert not _PYPI_DATACHECK.search(ok), ok


def test_the_readme_set_up_commands_work_in_a_new_terminal():
    """The set-up block's commands name the interpreter they need: ``python3`` to make the venv, then
    the venv's own programs (``.venv/bin/...``). A new terminal has no venv active, and a fresh machine
    may have no ``python``, ``pip`` or ``pytest`` on its PATH."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Set-up", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```bash\n(.*?)```", section, re.S)
    assert block is not None
    commands = [c.strip() for line in block.group(1).splitlines() for c in line.split("&&") if c.strip()]
    assert commands and commands[0].startswith("python3 -m venv .venv")
    for cmd in commands[1:]:
        assert cmd.startswith(".venv/bin/"), cmd
    assert ".venv/bin/python -m pytest -q" in commands
