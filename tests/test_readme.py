"""The README and docs/ stay true: every link leads to a file (and a heading) that exists, every
picture is there, and every command in the README runs as written as far as a test can run it:
its files exist and every flag it passes is one the script accepts."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def _anchor(heading: str) -> str:
    """GitHub's anchor of a heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    out, code = set(), False
    for line in path.read_text().splitlines():
        if line.startswith("```"):
            code = not code
        elif not code and line.startswith("#"):
            out.add(_anchor(line.lstrip("#")))
    return out


def _links(path: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", path.read_text(), flags=re.S)
    return re.findall(r"\]\(([^)\s]+)\)", text)


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_link_leads_somewhere(doc):
    bad = []
    for link in _links(doc):
        if link.startswith(("http://", "https://", "mailto:")):
            continue
        target, _, anchor = link.partition("#")
        path = (doc.parent / target).resolve() if target else doc
        if not path.exists():
            bad.append(f"{link}: no such file")
        elif anchor and path.suffix == ".md" and anchor not in _anchors(path):
            bad.append(f"{link}: no such heading")
    assert bad == []


def test_the_readme_is_short_and_links_the_rest():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) < 200
    for doc in (
        "cli",
        "python",
        "json",
        "limits",
        "deployment",
        "ray",
        "architecture",
        "performance",
    ):
        assert f"(docs/{doc}.md)" in readme, doc
    pictures = re.findall(r"!\[[^]]*\]\(([^)]+)\)", readme)
    assert len(pictures) >= 2 and all((ROOT / p).is_file() for p in pictures)


def _commands() -> list[list[str]]:
    """Every command of the README: its bash blocks' lines and its backticked table cells."""
    readme = (ROOT / "README.md").read_text()
    lines = [
        ln.split("  #")[0].strip()
        for block in re.findall(r"```bash\n(.*?)```", readme, flags=re.S)
        for ln in block.splitlines()
    ]
    lines += re.findall(r"\| `((?:python|pytest|streamlit|pip) [^`]*)` \|", readme)
    return [shlex.split(ln) for ln in lines if ln]


# Runs each script as ``python SCRIPT --help`` does (its folder first on sys.path, run as
# __main__), all in one interpreter: Python and torch start once, not once a script.
_HELP_DRIVER = r"""
import contextlib, io, json, runpy, sys
helps = {}
for script in json.loads(sys.argv[1]):
    sys.path.insert(0, script.rsplit("/", 1)[0])
    sys.argv = [script, "--help"]
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            runpy.run_path(script, run_name="__main__")
        code = 0
    except SystemExit as e:
        code = e.code
    finally:
        sys.path.pop(0)
    helps[script] = {"code": code, "stdout": out.getvalue()}
print(json.dumps(helps))
"""


def _helps(scripts: list[Path]) -> dict[Path, str]:
    """Each script's ``--help`` text; a script whose --help does not exit 0 fails the test."""
    for script in scripts:
        assert script.is_file(), script
    r = subprocess.run(
        [sys.executable, "-c", _HELP_DRIVER, json.dumps([str(s) for s in scripts])],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    helps = json.loads(r.stdout.strip().splitlines()[-1])
    for script, h in helps.items():
        assert h["code"] in (0, None), (script, h["code"], r.stderr[-3000:])
    return {Path(s): h["stdout"] for s, h in helps.items()}


def test_every_readme_command_names_files_that_exist_and_flags_its_script_takes():
    commands = _commands()
    assert ["streamlit", "run", "app.py"] in commands
    assert ["pytest"] in commands
    scripts = [ROOT / c[1] for c in commands if c[0] == "python" and c[1].endswith(".py")]
    helps = _helps(sorted(set(scripts)))  # each script's --help, once (a script may be named twice)
    for cmd in commands:
        if cmd[0] == "streamlit":
            assert (ROOT / cmd[2]).is_file()
        elif cmd[0] == "pip":
            for i, word in enumerate(cmd):
                if word in ("-r", "-c"):
                    assert (ROOT / cmd[i + 1]).is_file(), cmd
        elif cmd[0] == "python" and cmd[1].endswith(".py"):
            help_text = helps[ROOT / cmd[1]]
            flags = [w.split("=")[0] for w in cmd[2:] if w.startswith("--")]
            assert all(f in help_text for f in flags), (cmd, help_text)
    assert len(scripts) >= 4
