"""benchmarks/ is a folder of scripts that import each other by file name (``import parity_mindocr_common``):
no circle among them, counting every import (function-local ones too), so that each script loads on its own."""

from __future__ import annotations

import ast
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def script_imports() -> dict[str, set[str]]:
    """Each benchmarks/*.py script's name -> the other scripts it imports."""
    scripts = {path.stem: path for path in BENCHMARKS.glob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in scripts.items():
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                targets.add(node.module.split(".")[0])
        graph[name] = {t for t in targets if t in scripts and t != name}
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


def test_the_parity_scripts_share_a_module_instead_of_importing_each_other():
    graph = script_imports()
    assert graph["parity_mindocr_train"] >= {"parity_mindocr_common"}
    assert graph["parity_mindocr_eval"] >= {"parity_mindocr_common"}
    assert "parity_mindocr" not in graph["parity_mindocr_train"] | graph["parity_mindocr_eval"]


def test_no_import_circle_among_the_benchmark_scripts():
    cycle = find_cycle(script_imports())
    assert cycle is None, f"import circle in benchmarks/: {' -> '.join(cycle)}"


def test_the_cycle_finder_sees_a_circle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None
