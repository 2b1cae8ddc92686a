"""The layer rule of docs/architecture.md, checked on every import of every module
(module level and inside functions): imports go down the layers or stay in their own
unit, and the units import each other without cycles."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "tscube"

#: Layer of each unit (a top-level module or subpackage of tscube); the package root
#: ("tscube") is the public face and sits on top. Within layer 3 an algorithm package
#: imports only itself and lower layers, never a sibling algorithm.
LAYERS = {
    # 1. foundations
    "config": 1, "engines": 1, "timeaxis": 1, "_prefetch": 1, "_cuda_host": 1, "_kernel_io": 1,
    "_jit": 1, "parallel": 1, "datasets": 1,
    # 2. generic machinery that knows no algorithm
    "xarray_blocks": 2, "io": 2, "stac": 2, "runs": 2, "figures": 2,
    # 3. algorithms
    "bfast": 3, "stl": 3, "cluster": 3,
    # 4. public facades and the command line
    "xr": 4, "plot": 4, "cli": 4, "cluster._cli": 4, "": 4,
}


def _modules():
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        yield ".".join(parts), path


def _unit(module: str) -> str:
    """The unit of a module path relative to tscube ('bfast.monitor' -> 'bfast')."""
    if module in LAYERS:
        return module
    head = module.split(".")[0]
    if module.startswith("cluster._cli"):
        return "cluster._cli"
    return head


def _imports(module: str, path: Path):
    """tscube modules imported anywhere in ``path``, relative to tscube, with line numbers."""
    tree = ast.parse(path.read_text(), str(path))
    is_package = path.name == "__init__.py"
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "tscube" or alias.name.startswith("tscube."):
                    yield alias.name[len("tscube."):] if "." in alias.name else "", node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".") if module else []
                if not is_package:
                    base = base[:-1]
                base = base[: len(base) - (node.level - 1)] if node.level > 1 else base
                target = ".".join(base + ([node.module] if node.module else []))
            elif node.module and (node.module == "tscube" or node.module.startswith("tscube.")):
                target = node.module[len("tscube."):] if "." in node.module else ""
            else:
                continue
            # "from . import x" / "from tscube import x": x may be a submodule
            names = [f"{target}.{a.name}".strip(".") for a in node.names]
            for name in names:
                yield (name if (PACKAGE / name.replace(".", "/")).with_suffix(".py").exists()
                       or (PACKAGE / name.replace(".", "/")).is_dir() else target), node.lineno


def _edges():
    for module, path in _modules():
        for target, line in _imports(module, path):
            yield module, target, f"{path.relative_to(PACKAGE.parent)}:{line}"


def _exists(module: str) -> bool:
    path = PACKAGE / module.replace(".", "/") if module else PACKAGE
    return path.with_suffix(".py").exists() or (path / "__init__.py").exists()


def test_every_import_names_a_module():
    """Lazy imports inside functions are not run by every test: check their targets here."""
    missing = [f"{where}: {target}" for _, target, where in _edges() if not _exists(target)]
    assert not missing, "imports of modules that do not exist:\n" + "\n".join(missing)


def test_every_unit_has_a_layer():
    units = {_unit(module) for module, _ in _modules()} - {"data"}
    assert units <= set(LAYERS), f"units without a layer in docs/architecture.md: {sorted(units - set(LAYERS))}"


def test_imports_go_down_the_layers():
    wrong = []
    for module, target, where in _edges():
        source, dest = _unit(module), _unit(target)
        if source == dest or dest == "data":
            continue
        if LAYERS[dest] > LAYERS[source] or (LAYERS[dest] == LAYERS[source] == 3):
            wrong.append(f"{where}: {module or 'tscube'} (layer {LAYERS[source]}) imports "
                         f"{target or 'tscube'} (layer {LAYERS[dest]})")
    assert not wrong, "imports against the layer rule:\n" + "\n".join(wrong)


def test_units_import_each_other_without_cycles():
    graph: dict[str, set[str]] = {}
    for module, target, _ in _edges():
        source, dest = _unit(module), _unit(target)
        if source != dest:
            graph.setdefault(source, set()).add(dest)
    state: dict[str, int] = {}
    cycle: list[str] = []

    def visit(node, trail):
        state[node] = 1
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                cycle.extend(trail[trail.index(nxt):] + [node, nxt] if nxt in trail else [node, nxt])
                return True
            if state.get(nxt) is None and visit(nxt, trail + [node]):
                return True
        state[node] = 2
        return False

    for node in sorted(graph):
        if state.get(node) is None and visit(node, []):
            break
    assert not cycle, f"import cycle between units: {' -> '.join(u or 'tscube' for u in cycle)}"


@pytest.mark.parametrize("source, target", [("bfast.monitor", "xr"), ("io", "bfast"), ("stl._cuda", "bfast")])
def test_the_rule_catches_what_it_must(source, target):
    """The checks are not vacuous: these imports would be reported."""
    s, t = _unit(source), _unit(target)
    assert LAYERS[t] > LAYERS[s] or LAYERS[s] == LAYERS[t] == 3
