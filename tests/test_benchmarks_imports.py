"""benchmarks/ is a tree of scripts, not a package; these tests read the scripts' source (ast), they never
run them. A script's ``sys.path`` is its own folder, so a script imports only the scripts beside it
(``import parity_mindocr_common``), with no circle among them (function-local imports count too). Every
name a script imports from textdet exists in src, so a renamed or moved module fails here, not on the day
someone runs the script. No script shares its name with a textdet module, and benchmarks/README.md lists
every script."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BENCHMARKS = REPO / "benchmarks"
SRC = REPO / "src" / "textdet"


def scripts() -> dict[str, Path]:
    """Each script under benchmarks/, by its path relative to benchmarks/ (``speed/bench_compile.py``)."""
    return {path.relative_to(BENCHMARKS).as_posix(): path for path in sorted(BENCHMARKS.rglob("*.py"))}


def imported_modules(path: Path) -> set[str]:
    """Every absolute module a script imports, at any depth of its code."""
    modules: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            modules |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            modules.add(node.module)
    return modules


def textdet_imports(path: Path) -> list[tuple[str, str | None]]:
    """(module, name) of each ``from textdet.X import name``; (module, None) of each ``import textdet.X``."""
    found: list[tuple[str, str | None]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(alias.name, None) for alias in node.names if alias.name.split(".")[0] == "textdet"]
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "textdet":
            found += [(node.module, alias.name) for alias in node.names]
    return found


def script_imports() -> dict[str, set[str]]:
    """Each script (``folder/name.py``) -> the scripts of its own folder it imports (same form)."""
    graph: dict[str, set[str]] = {}
    for rel, path in scripts().items():
        siblings = {p.stem: p.relative_to(BENCHMARKS).as_posix() for p in path.parent.glob("*.py")}
        targets = {module.split(".")[0] for module in imported_modules(path)}
        graph[rel] = {siblings[t] for t in targets if t in siblings and siblings[t] != rel}
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle as [a, b, ..., a], or None; depth-first with the current path kept."""
    done: set[str] = set()
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        if node in path:
            return path[path.index(node):] + [node]
        if node in done:
            return None
        path.append(node)
        for target in sorted(graph[node]):
            cycle = visit(target)
            if cycle:
                return cycle
        path.pop()
        done.add(node)
        return None

    for start in sorted(graph):
        cycle = visit(start)
        if cycle:
            return cycle
    return None


def test_benchmarks_top_level_holds_only_the_readme_and_folders():
    files = sorted(p.name for p in BENCHMARKS.iterdir() if p.is_file())
    assert files == ["README.md"]


def test_the_readme_lists_every_script():
    readme = (BENCHMARKS / "README.md").read_text(encoding="utf-8")
    missing = [rel for rel in scripts() if f"`{Path(rel).name}`" not in readme]
    assert not missing, f"benchmarks/README.md does not list {missing}"


def test_a_script_imports_no_script_of_another_folder():
    """``import bench_targets`` in parity/ would run only with speed/ on sys.path: it must be a sibling."""
    by_name: dict[str, list[str]] = {}
    for rel, path in scripts().items():
        by_name.setdefault(path.stem, []).append(rel)
    strays = []
    for rel, path in scripts().items():
        siblings = {p.stem for p in path.parent.glob("*.py")}
        for module in imported_modules(path):
            top = module.split(".")[0]
            if top in by_name and top not in siblings:
                strays.append(f"{rel} imports {top} ({', '.join(by_name[top])})")
    assert not strays


def test_the_parity_scripts_share_a_module_instead_of_importing_each_other():
    graph = script_imports()
    common = "parity/mindocr/parity_mindocr_common.py"
    assert common in graph["parity/mindocr/parity_mindocr_train.py"]
    assert common in graph["parity/mindocr/parity_mindocr_eval.py"]
    parts = graph["parity/mindocr/parity_mindocr_train.py"] | graph["parity/mindocr/parity_mindocr_eval.py"]
    assert "parity/mindocr/parity_mindocr.py" not in parts


def test_no_import_circle_among_the_benchmark_scripts():
    cycle = find_cycle(script_imports())
    assert cycle is None, f"import circle in benchmarks/: {' -> '.join(cycle)}"


def test_the_cycle_finder_sees_a_circle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_every_textdet_name_a_script_imports_exists():
    stale = []
    for rel, path in scripts().items():
        for module, name in textdet_imports(path):
            try:
                imported = importlib.import_module(module)
            except ImportError as e:
                stale.append(f"{rel}: {module} ({e})")
                continue
            if name is None or hasattr(imported, name):
                continue
            try:  # ``from textdet import device``: a submodule, not an attribute, until it is imported
                importlib.import_module(f"{module}.{name}")
            except ImportError:
                stale.append(f"{rel}: {module} has no {name}")
    assert not stale, "stale textdet imports in benchmarks/:\n" + "\n".join(sorted(set(stale)))


def test_no_script_shares_its_name_with_a_textdet_module():
    """A script named like a src module (``error_kinds``) reads as its runner or its copy; neither is true."""
    modules = {p.stem for p in SRC.rglob("*.py") if p.stem != "__init__"}
    modules |= {p.parent.name for p in SRC.rglob("__init__.py")}
    clashes = sorted(rel for rel, path in scripts().items() if path.stem in modules)
    assert not clashes, f"scripts named like a textdet module: {clashes}"
