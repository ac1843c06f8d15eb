"""The layers import one way, and so do the engine's floors: the rules are the tables in
docs/architecture.md, read from the page, and every module of every layer, and every engine
module on its floor, is checked against them (imports inside functions included; inside the
engine the one arrow back up is named in the exceptions' table, with its reason)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "architecture.md"


def imported_top_names(path: Path) -> set[str]:
    """Top-level package names a module imports, anywhere in it (functions included)."""
    tree = ast.parse(path.read_text(), str(path))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
        elif (
            isinstance(node, ast.Call)
            and getattr(node.func, "attr", getattr(node.func, "id", "")) == "import_module"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            names.add(node.args[0].value.split(".")[0])
    return names


def _ticked(cell: str) -> list[str]:
    return re.findall(r"`([^`]+)`", cell)


def table(text: str, head: str) -> list[list[str]]:
    """The rows of the markdown table whose header row starts with ``| head |``, as cells."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"| {head} |"))
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([c.strip() for c in line.strip().strip("|").split("|")])
    return rows


def rules(text: str) -> tuple[dict[str, tuple[list[str], set[str]]], dict[str, list[str]]]:
    """The layers (name: its files, the names it may not import) and the imports with one home
    (name: the only files or folders that may import it)."""
    layers = {row[0]: (_ticked(row[1]), set(_ticked(row[2]))) for row in table(text, "layer")}
    homes = {_ticked(row[0])[0]: _ticked(row[1]) for row in table(text, "import")}
    return layers, homes


def modules(root: Path, where: str) -> list[Path]:
    p = root / where.rstrip("/")
    return [p] if p.is_file() else sorted(p.rglob("*.py"))


def violations(root: Path, text: str) -> list[str]:
    """Every import in ``root``'s layers that the tables in ``text`` forbid, one line each."""
    layers, homes = rules(text)
    bad = []
    for name, (places, forbidden) in layers.items():
        for where in places:
            for p in modules(root, where):
                up = imported_top_names(p) & forbidden
                bad += [f"{p.relative_to(root)} ({name}) imports {u}" for u in sorted(up)]
    for imported, places in homes.items():
        home = {p for w in places for p in modules(root, w)}
        for _, (where, _) in layers.items():
            for p in (p for w in where for p in modules(root, w)):
                if p not in home and imported in imported_top_names(p):
                    bad.append(f"{p.relative_to(root)} imports {imported}, only for {places}")
    return bad


def test_the_import_checker_sees_imports_inside_functions(tmp_path):
    p = tmp_path / "m.py"
    p.write_text(
        "import numpy as np\n"
        "def f():\n"
        "    from models.registry import load_classifier\n"
        "    import ray.serve\n"
        "    from . import sibling\n"
        "    return importlib.import_module('pages.lib')\n"
    )
    assert imported_top_names(p) == {"numpy", "models", "ray", "pages"}


def test_the_table_names_every_layer_and_each_of_its_folders_exists():
    layers, homes = rules(DOC.read_text())
    assert set(layers) == {"engine", "models", "serving", "app", "command line"}
    for name, (places, forbidden) in layers.items():
        assert places and forbidden, name
        for where in places:
            assert (ROOT / where.rstrip("/")).exists(), (name, where)
            assert modules(ROOT, where), (name, where)
    # every Python package at the top of the repository is a layer (nothing escapes the rule)
    covered = {w.rstrip("/") for places, _ in layers.values() for w in places}
    tops = {p.parent.name for p in ROOT.glob("*/__init__.py")}
    assert tops <= covered, tops - covered
    assert homes == {"ray": ["serving/serve_app.py"], "streamlit": ["app.py", "pages/"]}


def test_the_checker_finds_an_arrow_that_runs_back_up(tmp_path):
    """A planted upward import, one inside a function and one out of its home, are caught."""
    for d in ("limecraft_core", "models", "serving", "pages", "limecraft"):
        (tmp_path / d).mkdir()
        (tmp_path / d / "__init__.py").write_text("")
    (tmp_path / "app.py").write_text("import streamlit\n")
    (tmp_path / "limecraft_core" / "x.py").write_text("def f():\n    import models.demo\n")
    (tmp_path / "serving" / "q.py").write_text("import ray\n")
    (tmp_path / "serving" / "serve_app.py").write_text("import ray\n")
    (tmp_path / "limecraft" / "cli.py").write_text("import serving, models, limecraft_core\n")
    found = violations(tmp_path, DOC.read_text())
    assert found == [
        "limecraft_core/x.py (engine) imports models",
        "serving/q.py imports ray, only for ['serving/serve_app.py']",
    ]


def test_no_import_runs_back_up_a_layer():
    assert violations(ROOT, DOC.read_text()) == []


def test_the_command_line_package_imports_nothing_on_its_own():
    """``python -m limecraft`` imports ``limecraft/__init__.py`` before its ``__main__`` sets
    OMP_WAIT_POLICY, which must come before torch loads."""
    init = imported_top_names(ROOT / "limecraft" / "__init__.py")
    assert init <= {"__future__"}, init


# ----------------------------------------------------------------------------- no import cycles

PACKAGES = ("limecraft_core", "pages", "models", "serving", "limecraft")


def _module_files(root: Path) -> dict[str, Path]:
    files = {}
    for pkg in PACKAGES:
        for p in (root / pkg).rglob("*.py"):
            parts = list(p.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            files[".".join(parts)] = p
    return files


def _runtime_imports(tree: ast.AST):
    """Import statements that run: those under ``if TYPE_CHECKING:`` only serve the type
    checker, and are left out."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            yield from (n for child in node.orelse for n in _runtime_imports_of(child))
            continue
        yield from _runtime_imports_of(node)


def _runtime_imports_of(node: ast.AST):
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        yield node
    else:
        yield from _runtime_imports(node)


def _all_imports(tree: ast.AST):
    """Every import statement, those under ``if TYPE_CHECKING:`` included."""
    return (n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom)))


def import_graph(root: Path, type_only: bool = False) -> dict[str, set[str]]:
    """Module -> the project's modules it imports (inside functions too): ``from pkg import
    name`` is the module ``pkg.name`` where there is one, else the package. Imports under
    ``if TYPE_CHECKING:`` count only with ``type_only``."""
    files = _module_files(root)
    statements = _all_imports if type_only else _runtime_imports

    def resolve(mod: str, name: str | None = None) -> str | None:
        if name and f"{mod}.{name}" in files:
            return f"{mod}.{name}"
        while mod and mod not in files:
            mod = mod.rpartition(".")[0]
        return mod or None

    graph = {}
    for m, p in files.items():
        deps = set()
        for node in statements(ast.parse(p.read_text(), str(p))):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = m if p.name == "__init__.py" else m.rpartition(".")[0]
                    for _ in range(node.level - 1):
                        base = base.rpartition(".")[0]
                    mod = base + ("." + node.module if node.module else "")
                else:
                    mod = node.module or ""
                found = [resolve(mod, a.name) for a in node.names]
            else:
                found = [resolve(a.name) for a in node.names]
            deps |= {
                f for f in found if f and f != m and f.split(".")[0] in PACKAGES and f in files
            }
        graph[m] = deps
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The groups of modules that import each other, round a circle (Tarjan's strongly
    connected components of more than one module)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_cycle_finder_sees_a_circle_through_a_function_and_skips_type_checking(tmp_path):
    pkg = tmp_path / "pages" / "lib"
    pkg.mkdir(parents=True)
    (tmp_path / "pages" / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from . import b\n")
    (pkg / "b.py").write_text("def f():\n    from .a import x\n")
    (pkg / "c.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .d import y\n"
    )
    (pkg / "d.py").write_text("from pages.lib import c\n")
    assert cycles(import_graph(tmp_path)) == [["pages.lib.a", "pages.lib.b"]]


def test_no_two_modules_import_each_other():
    """No import circles, through function-level imports included: each circle found here was
    broken (pages.lib.auth read ``md`` through pages.lib.state, which imports auth; the
    watermark command imported the command line's helpers from the module that imports it)."""
    assert cycles(import_graph(ROOT)) == []


# ----------------------------------------------------------------------------- the engine's floors


def floors(text: str) -> tuple[list[tuple[str, list[str]]], dict[str, str]]:
    """The engine's floors from the ground up (name, its files and folders), and the arrows
    allowed back up (file: the file it may import), from docs/architecture.md's tables."""
    ordered = [(row[0], _ticked(row[1])) for row in table(text, "floor")]
    allowed = {_ticked(row[0])[0]: _ticked(row[1])[0] for row in table(text, "exception")}
    return ordered, allowed


def floor_of(rel: str, ordered: list[tuple[str, list[str]]]) -> int | None:
    """The floor (0 = the ground) that holds the file ``rel`` (a path from the root)."""
    for i, (_, places) in enumerate(ordered):
        if any(rel == w or (w.endswith("/") and rel.startswith(w)) for w in places):
            return i
    return None


def arrows_back_up(root: Path, text: str) -> list[str]:
    """Every engine import from a floor to a higher one that the exceptions do not name, and
    every engine module on no floor, one line each."""
    ordered, allowed = floors(text)
    files = {m: p.relative_to(root).as_posix() for m, p in _module_files(root).items()}
    bad = []
    for m, deps in sorted(import_graph(root, type_only=True).items()):
        here = files[m]
        if not here.startswith("limecraft_core/"):
            continue
        low = floor_of(here, ordered)
        if low is None:
            bad.append(f"{here} is on no floor")
            continue
        for d in sorted(deps):
            there = files[d]
            high = floor_of(there, ordered)
            if high is not None and high > low and allowed.get(here) != there:
                bad.append(f"{here} ({ordered[low][0]}) imports {there} ({ordered[high][0]})")
    return bad


def test_the_floors_hold_every_engine_module_once_from_the_ground_up():
    ordered, allowed = floors(DOC.read_text())
    assert [name.split()[0] for name, _ in ordered] == [str(i) for i in range(1, len(ordered) + 1)]
    places = [w for _, ws in ordered for w in ws]
    assert len(places) == len(set(places)), places
    for w in places:
        assert (ROOT / w.rstrip("/")).exists(), w
    engine = [p.relative_to(ROOT).as_posix() for p in sorted(ENGINE.rglob("*.py"))]
    assert [f for f in engine if floor_of(f, ordered) is None] == []
    # each exception is an arrow that really runs back up (one that no longer does is struck)
    for here, there in allowed.items():
        assert floor_of(there, ordered) > floor_of(here, ordered), (here, there)


def test_the_floor_checker_finds_an_arrow_back_up_and_a_module_on_no_floor(tmp_path):
    engine = tmp_path / "limecraft_core"
    for d in ("", "codecs", "perturb", "io", "audit", "_stages"):
        (engine / d).mkdir(exist_ok=True)
        (engine / d / "__init__.py").write_text("")
    (engine / "limits.py").write_text("def f():\n    from .audit import rows\n")
    (engine / "fill_table.py").write_text("def f():\n    from .perturb import inpaint\n")
    (engine / "perturb" / "inpaint.py").write_text("")
    (engine / "codecs" / "npz.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..io import images\n"
    )
    (engine / "io" / "images.py").write_text("from ..codecs import npz\n")
    (engine / "stray.py").write_text("")
    found = arrows_back_up(tmp_path, DOC.read_text())
    assert found == [
        "limecraft_core/codecs/npz.py (2 codecs) imports limecraft_core/io/images.py (9 files)",
        "limecraft_core/limits.py (2 codecs) imports limecraft_core/audit/__init__.py (8 audit)",
        "limecraft_core/stray.py is on no floor",
    ]


def test_no_import_in_the_engine_runs_back_up_a_floor():
    assert arrows_back_up(ROOT, DOC.read_text()) == []


# ----------------------------------------------------------------------------- files only in io/

ENGINE = ROOT / "limecraft_core"
FILE_IO = ENGINE / "io"
# calls that open, read, write, list or remove a path: the builtin open; pathlib's methods;
# os, shutil and tempfile; Pillow's Image.open (all of them take a path)
_PATH_METHODS = {
    "read_text",
    "write_text",
    "read_bytes",
    "write_bytes",
    "mkdir",
    "rmdir",
    "unlink",
    "touch",
    "iterdir",
    "glob",
    "rglob",
    "rename",
    "symlink_to",
}
_OS = {"open", "remove", "unlink", "rename", "replace", "makedirs", "mkdir", "listdir", "scandir"}
_OS |= {"walk", "rmdir", "fdopen"}


def file_calls(path: Path) -> list[str]:
    """Where a module touches files on disk, as ``line: call``."""
    tree = ast.parse(path.read_text(), str(path))
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        owner = f.value.id if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) else ""
        if isinstance(f, ast.Name) and f.id == "open":
            found.append((node.lineno, "open"))
        elif isinstance(f, ast.Attribute) and (
            f.attr in _PATH_METHODS
            or (owner == "os" and f.attr in _OS)
            or owner in ("shutil", "tempfile")
            or (owner == "Image" and f.attr == "open")
        ):
            found.append((node.lineno, f"{owner + '.' if owner else ''}{f.attr}"))
    return [f"{line}: {call}" for line, call in sorted(found)]


def test_the_file_checker_sees_each_kind_of_file_call(tmp_path):
    p = tmp_path / "m.py"
    p.write_text(
        "import os, shutil, tempfile\n"
        "def f(path, im, buf):\n"
        "    with open(path) as fh:\n"
        "        fh.read()\n"
        "    path.write_bytes(b'')\n"
        "    os.replace(path, path)\n"
        "    shutil.rmtree(path)\n"
        "    tempfile.mkdtemp()\n"
        "    Image.open(path)\n"
        "    im.save(buf)\n"  # into a buffer: not a file call
        "    'a'.replace('a', 'b')\n"  # str.replace: not os.replace
    )
    assert file_calls(p) == [
        "3: open",
        "5: path.write_bytes",
        "6: os.replace",
        "7: shutil.rmtree",
        "8: tempfile.mkdtemp",
        "9: Image.open",
    ]


#: engine modules outside io/ that read a file, each with its reason (docs/architecture.md)
READS_OUTSIDE_IO = {
    # the kernel's description of the CPU (for the bf16 choice), not a user's file: on the
    # ground, below the classifier that asks it
    ENGINE / "_system.py": ["17: open"],
}


def test_only_the_engines_io_package_reads_or_writes_files():
    files = sorted(ENGINE.rglob("*.py"))
    outside = [p for p in files if FILE_IO not in p.parents and p not in READS_OUTSIDE_IO]
    assert {p: file_calls(p) for p in READS_OUTSIDE_IO} == READS_OUTSIDE_IO
    assert len(outside) >= 15
    bad = {str(p.relative_to(ROOT)): file_calls(p) for p in outside}
    assert not {k: v for k, v in bad.items() if v}
    # and io/ is where they are (the check looks for what is really there)
    inside = [c for p in files if FILE_IO in p.parents for c in file_calls(p)]
    assert len(inside) >= 5, inside
