"""docs/ARCHITECTURE.md's house rules, read from the source: imports go down the floors, no import cycles,
no file over 400 lines (per file only: no total budget); inference never loads the training floors; the
engine calls the watch through its one interface; only the build layer reads the Config; comments state
rules, not experiment history. Every import counts, function-local and TYPE_CHECKING too."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "textdet"
# Per file only: a total budget rewarded code written short rather than clear.
MAX_FILE_LINES = 400
# First part of the module name -> floor. A module imports its own part or a lower floor (never a sibling).
LAYERS = {
    "errors": 0,
    "textdet": 1, "geometry": 1, "config": 1, "checks": 1, "device": 1, "hub": 1, "icdar": 1,
    "unpickling": 1, "export_defaults": 1,
    "data": 2, "models": 2, "loss": 2, "postprocess": 2, "metrics": 2,
    "runtime": 3, "report": 3,
    "watch": 4,
    "engine": 5, "export": 5, "predict": 5, "quantize": 5,
    "build": 6,
    "commands": 7,
    "cli": 8,
    "__main__": 9,
}
# The modules that read the Config object, outside config/, cli and commands/: the build layer.
BUILD_MODULES = {"textdet.build.sections", "textdet.build.parts", "textdet.build.training"}
MAX_ENGINE_MODULES = 16


def _modules() -> dict[str, Path]:
    out = {}
    for path in SRC.rglob("*.py"):
        parts = ("textdet", *path.relative_to(SRC).with_suffix("").parts)
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def _edges(modules: dict[str, Path]) -> set[tuple[str, str]]:
    edges = set()
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(up + ([base] if base else []))
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
            else:
                continue
            edges |= {(name, t) for t in targets if t in modules and t != name}
    return edges


def _part(module: str) -> str:
    return module.split(".")[1] if "." in module else module


def test_edges_are_read_from_source():
    edges = _edges(_modules())
    assert ("textdet.cli", "textdet.errors") in edges
    assert ("textdet.__main__", "textdet.cli") in edges


def test_imports_only_go_down_the_floors():
    modules = _modules()
    unknown = sorted({_part(m) for m in modules} - set(LAYERS))
    assert not unknown, f"give these a floor in LAYERS (and in docs/ARCHITECTURE.md): {unknown}"
    upward = sorted((a, b) for a, b in _edges(modules)
                    if _part(a) != _part(b) and LAYERS[_part(b)] >= LAYERS[_part(a)])
    assert not upward, f"imports going up or sideways: {upward}"


def test_no_import_cycles():
    graph: dict[str, set[str]] = {m: set() for m in _modules()}
    for a, b in _edges(_modules()):
        graph[a].add(b)
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(m: str, path: list[str]) -> None:
        state[m] = 1
        for n in sorted(graph[m]):
            cycle = [*path[path.index(n):], m, n] if n in path else [m, n]
            assert state.get(n) != 1, f"import cycle: {' -> '.join(cycle)}"
            if n not in state:
                visit(n, [*path, m])
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m, [])


def _sizes() -> dict[str, int]:
    return {str(p.relative_to(SRC)): len(p.read_text(encoding="utf-8").splitlines()) for p in _modules().values()}


def test_no_file_over_400_lines():
    big = {k: v for k, v in _sizes().items() if v > MAX_FILE_LINES}
    assert not big, f"files over {MAX_FILE_LINES} lines: {big}"


def test_cli_does_not_import_torch():
    """`textdet --help` and a config typo must answer before torch (or cv2 and numpy) is imported (start-up
    budget)."""
    code = ("import sys, textdet.cli, textdet.config; "
            "print(sorted(name for name in ('torch', 'cv2', 'numpy') if name in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def _reachable(start: str, edges: set[tuple[str, str]]) -> set[str]:
    graph: dict[str, set[str]] = {}
    for a, b in edges:
        graph.setdefault(a, set()).add(b)
    seen, todo = {start}, [start]
    while todo:
        for nxt in graph.get(todo.pop(), ()):
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


def test_inference_loads_no_training_floor():
    """A user who predicts or exports never imports the trainer or the watch, not even through another module."""
    edges = _edges(_modules())
    for entry in ("textdet.predict", "textdet.export", "textdet.quantize"):
        training = sorted(m for m in _reachable(entry, edges) if _part(m) in ("engine", "watch"))
        assert not training, f"{entry} reaches the training floors: {training}"


def test_engine_calls_the_watch_through_its_interface_only():
    edges = _edges(_modules())
    used = sorted({b for a, b in edges if _part(a) == "engine" and _part(b) == "watch"})
    assert used == ["textdet.watch.run"], used


def test_engine_holds_the_training_core_only():
    engine = [m for m in _modules() if _part(m) == "engine" and m != "textdet.engine"]
    assert len(engine) <= MAX_ENGINE_MODULES, sorted(engine)


def test_only_the_build_layer_reads_the_config():
    """Outside config/, cli and commands/, the Config object is read by the build modules alone: everything
    else takes plain arguments or settings built from it."""
    readers = set()
    for name, path in _modules().items():
        if _part(name) in ("config", "cli", "commands"):
            continue
        if "from textdet.config import" in path.read_text(encoding="utf-8"):
            readers.add(name)
    assert readers <= BUILD_MODULES, sorted(readers - BUILD_MODULES)


HISTORY = re.compile(r"[A-Za-z]+(st|nd|rd|th) round|round [0-9]")


def test_comments_state_rules_not_history():
    """Docstrings and comments say what a piece does and why; the experiments behind a rule are a decision
    record's evidence, not the code's."""
    found = []
    for path in _modules().values():
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if HISTORY.search(line):
                found.append(f"{path.relative_to(SRC)}:{number}: {line.strip()}")
    assert not found, "\n".join(found)
