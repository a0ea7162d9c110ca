"""The package's shape: dependencies between stages point one way, no module reaches into another module's
private names, no module grows past a size a reader can hold, and ``import onnxroof`` stays light.

The stages, lowest first (a module may import from its own stage and from the stages below it):

    errors                  the user error, which every stage may raise
    atomic, units           atomic file writes (a folder refused), byte counts and amounts with their units
    ir, devices             the analysis graph; the device schema and files (data: they import nothing above)
    load                    file -> Graph
    passes                  graph rewrites: model -> model
    costs                   per-op cost functions
    predict                 roofline, engine model, analysis
    ort                     everything that runs onnxruntime (measure, profile, calibrate, validate)
    api                     the library's front door: onnxroof.analyze
    whatif                  variants of a model compared: rewrite, compare, sweep, explore
    report                  renderers of what predict, ort and whatif produce
    cli                     the command line

Inside a stage no modules import one another, at any depth: a cycle through an import inside a function is refused
too (see test_no_modules_import_one_another).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "onnxroof"

STAGES: dict[str, int] = {
    "onnxroof": 0,  # the package itself: a lazy facade that imports nothing when loaded
    "onnxroof.errors": -1,  # below the rest of stage 0: atomic and units refuse bad input with a UserError
    "onnxroof.atomic": 0,
    "onnxroof.units": 0,
    "onnxroof.ir": 1,
    "onnxroof.devices": 1,
    "onnxroof.load": 2,
    "onnxroof.passes": 3,
    "onnxroof.costs": 4,
    "onnxroof.predict": 5,
    "onnxroof.ort": 6,
    "onnxroof.api": 7,
    "onnxroof.whatif": 8,
    "onnxroof.report": 9,
    "onnxroof.cli": 10,
    "onnxroof.__main__": 11,
}
MAX_LINES = 600


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def stage_of(module: str) -> str:
    """The stage a module belongs to: the longest STAGES key that is the module or a package above it."""
    candidates = [s for s in STAGES if module == s or module.startswith(s + ".")]
    return max(candidates, key=len)


def is_module(dotted: str) -> bool:
    """Whether ``dotted`` names a module or package of this checkout."""
    path = ROOT.joinpath(*dotted.split("."))
    return (
        path.with_suffix(".py").exists()
        or (path / "__init__.py").exists()
        or any(path.parent.glob(path.name + ".*.so"))
    )


def imports(tree: ast.AST, module: str) -> list[tuple[int, str, list[str]]]:
    """(line, imported module, names taken from it) for every import of a module of this checkout, at any depth
    (imports inside functions count: they are dependencies all the same)."""
    found = []
    package = module if (ROOT.joinpath(*module.split(".")) / "__init__.py").exists() else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [
                (node.lineno, a.name, []) for a in node.names if a.name.split(".")[0] in ("onnxroof", "model_zoo")
            ]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(
                    package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else [])
                )
            if base.split(".")[0] in ("onnxroof", "model_zoo"):
                found.append((node.lineno, base, [a.name for a in node.names]))
    return found


def python_files(*folders: str) -> list[Path]:
    return sorted(p for folder in folders for p in (ROOT / folder).rglob("*.py"))


def layer_violations(source: str, module: str) -> list[str]:
    """The imports in ``source`` (the text of ``module``) of a module in a stage above the module's own."""
    own = stage_of(module)
    violations = []
    for line, target, names in imports(ast.parse(source), module):
        if target.split(".")[0] != "onnxroof":
            continue
        for imported in [f"{target}.{n}" if is_module(f"{target}.{n}") else target for n in names] or [target]:
            other = stage_of(imported)
            if other != own and imported != "onnxroof" and STAGES[other] >= STAGES[own]:
                violations.append(f"{line}: {own} imports {imported} ({other})")
    return violations


def test_dependencies_point_one_way():
    violations = [
        f"{path.relative_to(ROOT)}:{v}"
        for path in python_files("onnxroof")
        for v in layer_violations(path.read_text(encoding="utf-8"), module_name(path))
    ]
    assert violations == []


class _RunTimeImports(ast.NodeTransformer):
    """A tree without the bodies of its ``if TYPE_CHECKING:`` blocks: names for the type checker, never run."""

    def visit_If(self, node: ast.If) -> ast.AST:
        test = node.test
        name = test.id if isinstance(test, ast.Name) else test.attr if isinstance(test, ast.Attribute) else None
        if name == "TYPE_CHECKING":
            node.body = [ast.Pass()]
        return self.generic_visit(node)


def import_graph(sources: Mapping[str, str]) -> dict[str, set[str]]:
    """Module -> the modules of onnxroof it imports, for each of ``sources`` (module -> its text): imports at any
    depth, those inside functions included, those under ``if TYPE_CHECKING:`` left out."""
    graph: dict[str, set[str]] = {}
    for module, source in sources.items():
        targets = graph.setdefault(module, set())
        for _, target, names in imports(_RunTimeImports().visit(ast.parse(source)), module):
            if target.split(".")[0] != "onnxroof":
                continue
            for imported in [f"{target}.{n}" if is_module(f"{target}.{n}") else target for n in names] or [target]:
                if imported != module:
                    targets.add(imported)
    return graph


def import_cycles(graph: Mapping[str, set[str]]) -> list[str]:
    """Each group of modules that import one another (a strongly connected component of ``graph`` with more than
    one module, found by Tarjan's algorithm), as one cycle through it: 'a -> b -> a'."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[set[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for other in sorted(graph.get(module, ())):
            if other not in index:
                visit(other)
                low[module] = min(low[module], low[other])
            elif other in stack:
                low[module] = min(low[module], index[other])
        if low[module] == index[module]:
            group = {stack.pop()}
            while module not in group:
                group.add(stack.pop())
            if len(group) > 1:
                groups.append(group)

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return sorted(_cycle_through(graph, group) for group in groups)


def _cycle_through(graph: Mapping[str, set[str]], group: set[str]) -> str:
    """The shortest cycle from the group's first module back to it, inside the group."""
    start = min(group)
    paths = {start: [start]}
    queue = [start]
    while queue:
        module = queue.pop(0)
        for other in sorted(graph.get(module, ())):
            if other == start:
                return " -> ".join([*paths[module], start])
            if other in group and other not in paths:
                paths[other] = [*paths[module], other]
                queue.append(other)
    raise AssertionError(f"no cycle through {sorted(group)}")


def test_no_modules_import_one_another():
    """Import cycles are refused, through imports inside functions too. An import inside a function defers when
    a dependency loads, not whether there is one: two modules that import each other, one of them lazily, are one
    unit split in two, and the first import moved to the top of its file fails at import time. Imports inside
    functions keep their own purpose (heavy libraries left out of ``import onnxroof``), which needs no cycle.
    Imports under ``if TYPE_CHECKING:`` never run, and are left out."""
    sources = {module_name(path): path.read_text(encoding="utf-8") for path in python_files("onnxroof")}
    assert import_cycles(import_graph(sources)) == []


def test_the_zoo_needs_nothing_of_onnxroof():
    """Loading builds zoo:NAME models, so the zoo sits below every stage."""
    for path in python_files("model_zoo"):
        for line, target, _ in imports(ast.parse(path.read_text(encoding="utf-8")), module_name(path)):
            assert target.split(".")[0] != "onnxroof", f"{path.relative_to(ROOT)}:{line} imports {target}"


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def private_reaches(source: str, module: str) -> list[str]:
    """Private names ``source`` (the text of ``module``) takes from other modules of this checkout: imported by
    name, or read as an attribute of a module it imported. A package's private names are its modules' to
    share (the native reader takes the package's compiled extension, ``_wire``)."""
    tree = ast.parse(source)
    found = []
    bound_modules: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] in ("onnxroof", "model_zoo"):
                    if any(_private(part) for part in alias.name.split(".")):
                        found.append(f"{node.lineno}: import {alias.name}")
                    bound_modules.add(alias.asname or alias.name.split(".")[0])
    for line, target, names in imports(tree, module):
        for name in names:
            qualified = f"{target}.{name}"
            if _private(name) and module.rpartition(".")[0] != target:
                found.append(f"{line}: from {target} import {name}")
            if is_module(qualified):
                bound_modules.add(name)
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and _private(node.attr)
            and isinstance(node.value, ast.Name)
            and node.value.id in bound_modules
        ):
            found.append(f"{node.lineno}: {node.value.id}.{node.attr}")
    return found


def test_no_module_reaches_into_another_modules_private_names():
    violations = [
        f"{path.relative_to(ROOT)}:{v}"
        for path in python_files("onnxroof", "tools", "model_zoo", "tests")
        for v in private_reaches(path.read_text(encoding="utf-8"), module_name(path))
    ]
    assert violations == []


def test_tests_share_fixtures_through_conftest_never_by_importing_a_test_module():
    imported = []
    for path in python_files("tests"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            imported += [f"{path.relative_to(ROOT)}: {n}" for n in names if n.split(".")[-1].startswith("test_")]
    assert imported == []


def test_no_python_file_of_the_package_is_longer_than_a_reader_can_hold():
    long = {
        str(p.relative_to(ROOT)): n
        for p in python_files("onnxroof")
        if (n := len(p.read_text().splitlines())) > MAX_LINES
    }
    assert long == {}


@pytest.mark.parametrize("heavy", ["onnxruntime", "sympy", "matplotlib", "onnx", "numpy"])
def test_importing_onnxroof_loads_no_heavy_library(heavy: str):
    code = f"import sys, onnxroof; sys.exit(any(m == {heavy!r} or m.startswith({heavy!r} + '.') for m in sys.modules))"
    assert subprocess.run([sys.executable, "-c", code], cwd=ROOT).returncode == 0


def test_the_help_loads_no_heavy_library():
    """``onnxroof --help`` is instant: the command modules import their libraries when they run."""
    code = (
        "import sys, contextlib, io\nfrom onnxroof.cli import build_parser\nbuild_parser()\n"
        "sys.exit(any(m.split('.')[0] in ('onnxruntime', 'sympy', 'onnx', 'numpy') for m in sys.modules))"
    )
    assert subprocess.run([sys.executable, "-c", code], cwd=ROOT).returncode == 0


def test_the_checks_above_catch_what_they_look_for():
    """Each check flags what it looks for, so that an empty list above means something."""
    assert stage_of("onnxroof.load.graph") == "onnxroof.load"
    assert stage_of("onnxroof.ort.calibrate") == "onnxroof.ort"
    upward = "from onnxroof.ort.measure import measure\nimport onnxroof.cli\nfrom onnxroof.ir import Graph\n"
    assert layer_violations(upward, "onnxroof.load.graph") == [
        "1: onnxroof.load imports onnxroof.ort.measure (onnxroof.ort)",
        "2: onnxroof.load imports onnxroof.cli (onnxroof.cli)",
    ]
    assert layer_violations("from onnxroof.load import graph\n", "onnxroof.predict.analysis") == []
    reaching = (
        "from onnxroof.load.graph import _build\nfrom onnxroof.load import graph\ngraph._assemble\ngraph.__doc__\n"
    )
    assert private_reaches(reaching, "onnxroof.predict.probe") == [
        "1: from onnxroof.load.graph import _build",
        "3: graph._assemble",
    ]
    assert private_reaches("from onnxroof.load import _wire\n", "onnxroof.load.native") == []
    # a cycle closed by an import inside a function, beside a module that only imports one of the pair
    planted = {
        "onnxroof.ort.first": "from onnxroof.ort.second import g\n",
        "onnxroof.ort.second": "def g():\n    from onnxroof.ort.first import f\n",
        "onnxroof.ort.third": "from onnxroof.ort.first import f\n",
    }
    assert import_cycles(import_graph(planted)) == ["onnxroof.ort.first -> onnxroof.ort.second -> onnxroof.ort.first"]
    typing_only = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from onnxroof.ort.first import f\n"
    assert import_cycles(import_graph({**planted, "onnxroof.ort.second": typing_only})) == []
    longer = {
        "onnxroof.a": "import onnxroof.b\n",
        "onnxroof.b": "import onnxroof.c\n",
        "onnxroof.c": "import onnxroof.a\n",
    }
    assert import_cycles(import_graph(longer)) == ["onnxroof.a -> onnxroof.b -> onnxroof.c -> onnxroof.a"]
