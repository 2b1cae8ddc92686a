"""The import rules of docs/architecture.md, checked on every import of every module
(module level and inside functions):

* imports go down the layers: between tscube's units (:data:`LAYERS` ``""``) and between
  the subpackages of a unit that has layers of its own (``bfast``); members of an
  independent layer (the algorithms; BFAST Monitor and BFAST Lite) never import each other;
* no import cycle, between units or between any two modules;
* no module imports its own package's ``__init__`` (a package's ``__init__`` only gathers
  what its modules define, for the modules outside it);
* a name with a leading underscore is private to its module: no other module imports it
  or reads it off the module; a private module (``_cpu.py``) is imported only by modules
  of its own package.

The checks are functions of a package folder, so that the tests at the end can show them
failing on small packages written to break each rule.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "tscube"

#: Layers of the units of a package (``""``: tscube itself; ``"bfast"``: its subpackages).
#: A module imports modules of its own unit and of lower layers; the key ``""`` of a
#: table is the package's ``__init__``, the top (it imports what it re-exports).
LAYERS = {
    "": {
        # 1. foundations: know no algorithm and no xarray
        "config": 1, "engines": 1, "timeaxis": 1, "_prefetch": 1, "_simd": 1, "_cuda_host": 1, "_kernel_io": 1,
        "_jit": 1, "_threads": 1, "_numbers": 1, "parallel": 1, "datasets": 1,
        # 2. generic machinery that knows no algorithm
        "xarray_blocks": 2, "io": 2, "stac": 2, "runs": 2, "figures": 2,
        # 3. algorithms
        "stl": 3, "cluster": 3,
        # 4. algorithms built on others: classic BFAST starts from a periodic STL
        "bfast": 4,
        # 5. public faces and the command line
        "xr": 5, "plot": 5, "warmup": 5, "viewer": 5, "cli": 5, "": 6,
    },
    "bfast": {"core": 1, "monitor": 2, "lite": 2, "classic": 2, "nrt": 3, "": 4},
}
#: Layers whose units never import each other (sibling algorithms).
INDEPENDENT = {"": {3}, "bfast": {2}}
#: Units that never import each other though their layers would allow it: BFAST Lite and
#: the near-real-time state of BFAST Monitor share nothing but ``bfast.core``.
APART = [("bfast.lite", "bfast.nrt")]
#: Folders of package data, not modules.
DATA = {"data"}


@dataclass(frozen=True)
class Edge:
    """``source`` imports ``target`` (module paths relative to the package; ``""`` is the
    package's ``__init__``), at ``where``; ``name``: the name imported from it (``None``
    for a whole module), ``attribute``: read as ``module.name``."""

    source: str
    target: str
    where: str
    name: str | None = None
    attribute: bool = False


def modules(root: Path) -> dict[str, Path]:
    """Every module under ``root`` by its dotted path relative to it (a package by its own)."""
    found = {}
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def edges(root: Path, package: str = "tscube") -> list[Edge]:
    """Every import of a module of ``root`` (the package ``package``) by a module of it."""
    found = modules(root)
    result = []
    for module, path in found.items():
        tree = ast.parse(path.read_text(), str(path))
        is_package = path.name == "__init__.py"
        where = lambda node: f"{path.relative_to(root.parent)}:{node.lineno}"  # noqa: E731
        bound: dict[str, str] = {}  # local names of imported package modules

        def absolute(name: str) -> str | None:
            if name == package:
                return ""
            return name[len(package) + 1:] if name.startswith(package + ".") else None

        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    target = absolute(alias.name)
                    if target is not None:
                        result.append(Edge(module, target, where(node)))
                        if alias.asname:
                            bound[alias.asname] = target
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = module.split(".") if module else []
                    if not is_package:
                        base = base[:-1]
                    base = base[: len(base) - (node.level - 1)]
                    target = ".".join(base + ([node.module] if node.module else []))
                else:
                    target = absolute(node.module or "")
                    if target is None:
                        continue
                for alias in node.names:
                    sub = f"{target}.{alias.name}".strip(".")
                    if sub in found:  # "from . import x": x is a module
                        result.append(Edge(module, sub, where(node)))
                        bound[alias.asname or alias.name] = sub
                    else:
                        result.append(Edge(module, target, where(node), name=alias.name))
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in bound
                    and is_private(node.attr)):
                target = bound[node.value.id]
                sub = f"{target}.{node.attr}".strip(".")
                if sub in found:
                    result.append(Edge(module, sub, where(node)))
                else:
                    result.append(Edge(module, target, where(node), name=node.attr, attribute=True))
    return result


def inside(module: str, package: str) -> bool:
    """``module`` is ``package`` or one of its modules (``""`` holds everything)."""
    return package == "" or module == package or module.startswith(package + ".")


def unit_of(module: str, package: str) -> str:
    """The unit of ``package`` (the child module or subpackage) that holds ``module``;
    ``""`` for the package's ``__init__`` itself."""
    rest = module[len(package):].lstrip(".") if package else module
    return rest.split(".")[0] if rest else ""


def layer_violations(all_edges: list[Edge], layers: dict, independent: dict) -> list[str]:
    """Imports against the layers: at the outermost package of ``layers`` where the two
    modules fall into different units."""
    wrong = []
    for edge in all_edges:
        if edge.source == edge.target:
            continue
        for package in sorted(layers, key=len):
            if not (inside(edge.source, package) and inside(edge.target, package)):
                continue
            source, target = unit_of(edge.source, package), unit_of(edge.target, package)
            if source == target:
                continue
            table = layers[package]
            if source not in table or target not in table:
                wrong.append(f"{edge.where}: {source or target} has no layer in {package or 'tscube'}")
            elif table[target] > table[source] or (table[target] == table[source] in independent.get(package, ())):
                wrong.append(f"{edge.where}: {edge.source or 'tscube'} (layer {table[source]} of "
                             f"{package or 'tscube'}) imports {edge.target or package or 'tscube'} "
                             f"(layer {table[target]})")
            break
    return wrong


def find_cycle(all_edges: list[Edge], group=lambda module: module) -> list[str]:
    """A cycle of the import graph between the groups of modules (``group``: the module
    itself, or its unit), as the list of its nodes, first one repeated; [] for none."""
    graph: dict[str, set[str]] = {}
    for edge in all_edges:
        source, target = group(edge.source), group(edge.target)
        if source != target:
            graph.setdefault(source, set()).add(target)
    state: dict[str, int] = {}
    trail: list[str] = []

    def visit(node):
        state[node] = 1
        trail.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return trail[trail.index(nxt):] + [nxt]
            if state.get(nxt) is None:
                cycle = visit(nxt)
                if cycle:
                    return cycle
        state[node] = 2
        trail.pop()
        return []

    for node in sorted(graph):
        if state.get(node) is None:
            cycle = visit(node)
            if cycle:
                return cycle
    return []


def own_init_violations(all_edges: list[Edge], packages: set[str]) -> list[str]:
    """Modules that import the ``__init__`` of a package that holds them."""
    return [f"{edge.where}: {edge.source} imports its own package's __init__ ({edge.target or 'tscube'})"
            for edge in all_edges
            if edge.target in packages and edge.source != edge.target and inside(edge.source, edge.target)]


def private_violations(all_edges: list[Edge]) -> list[str]:
    """Private names taken from another module, private modules imported from outside
    their package."""
    wrong = []
    for edge in all_edges:
        if edge.name is not None and is_private(edge.name) and edge.source != edge.target:
            how = "reads" if edge.attribute else "imports"
            wrong.append(f"{edge.where}: {edge.source or 'tscube'} {how} the private name {edge.name} "
                         f"of {edge.target or 'tscube'}")
        parts = edge.target.split(".") if edge.target else []
        for i, part in enumerate(parts):
            owner = ".".join(parts[:i])
            if is_private(part) and not inside(edge.source, owner):
                wrong.append(f"{edge.where}: {edge.source or 'tscube'} imports the private module "
                             f"{'.'.join(parts[:i + 1])} from outside {owner or 'tscube'}")
                break
    return wrong


# --------------------------------------------------------------------------------------
# the rules on tscube

EDGES = edges(PACKAGE)
MODULES = modules(PACKAGE)
PACKAGES = {name for name, path in MODULES.items() if path.name == "__init__.py"}


def test_every_import_names_a_module():
    """Lazy imports inside functions are not run by every test: check their targets here."""
    missing = [f"{edge.where}: {edge.target}" for edge in EDGES if edge.target not in MODULES]
    assert not missing, "imports of modules that do not exist:\n" + "\n".join(missing)


def test_every_unit_has_a_layer():
    missing = []
    for package, table in LAYERS.items():
        units = {unit_of(module, package) for module in MODULES if inside(module, package)}
        missing += [f"{package or 'tscube'}.{unit}" for unit in sorted(units - set(table) - DATA)]
    assert not missing, f"units without a layer in docs/architecture.md: {missing}"


def test_imports_go_down_the_layers():
    wrong = layer_violations(EDGES, LAYERS, INDEPENDENT)
    assert not wrong, "imports against the layer rule:\n" + "\n".join(wrong)


def test_units_kept_apart_never_import_each_other():
    wrong = [f"{edge.where}: {edge.source} imports {edge.target}" for edge in EDGES for a, b in APART
             if (inside(edge.source, a) and inside(edge.target, b)) or (inside(edge.source, b) and inside(edge.target, a))]
    assert not wrong, "\n".join(wrong)


def test_units_import_each_other_without_cycles():
    cycle = find_cycle(EDGES, lambda module: unit_of(module, ""))
    assert not cycle, f"import cycle between units: {' -> '.join(u or 'tscube' for u in cycle)}"


def test_modules_import_each_other_without_cycles():
    cycle = find_cycle(EDGES)
    assert not cycle, f"import cycle between modules: {' -> '.join(m or 'tscube' for m in cycle)}"


def test_no_module_imports_its_own_package():
    wrong = own_init_violations(EDGES, PACKAGES)
    assert not wrong, "\n".join(wrong)


def test_private_names_stay_in_their_module():
    wrong = private_violations(EDGES)
    assert not wrong, "private names used across modules:\n" + "\n".join(wrong)


# --------------------------------------------------------------------------------------
# the checks are not vacuous: each finds what it must in a package written to break it


def _write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / "pkg" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root / "pkg"


def test_the_checks_find_a_cycle_inside_a_unit(tmp_path):
    root = _write(tmp_path, {
        "__init__.py": "", "algo/__init__.py": "",
        "algo/a.py": "from .b import f\n", "algo/b.py": "def f():\n    from .a import g\n",
    })
    found = edges(root, "pkg")
    assert find_cycle(found) in (["algo.a", "algo.b", "algo.a"], ["algo.b", "algo.a", "algo.b"])
    assert find_cycle(found, lambda module: unit_of(module, "")) == []  # one unit: no cycle between units


def test_the_checks_find_private_imports(tmp_path):
    root = _write(tmp_path, {
        "__init__.py": "", "a.py": "_hidden = 1\n", "b.py": "from .a import _hidden\n",
        "c.py": "from . import a\nx = a._hidden\n",
        "algo/__init__.py": "", "algo/_cpu.py": "", "algo/api.py": "from . import _cpu\n",
        "other/__init__.py": "", "other/use.py": "from ..algo import _cpu\nimport pkg.algo._cpu\n",
    })
    wrong = private_violations(edges(root, "pkg"))
    assert any("b.py:1" in w and "private name _hidden" in w for w in wrong)
    assert any("c.py:2" in w and "reads the private name _hidden" in w for w in wrong)
    assert sum("other/use.py" in w and "private module algo._cpu" in w for w in wrong) == 2
    assert not any("algo/api.py" in w for w in wrong)  # a private module within its package


def test_the_checks_find_imports_of_the_own_package_and_up_the_layers(tmp_path):
    root = _write(tmp_path, {
        "__init__.py": "from .algo import f\n", "base.py": "def g():\n    from .algo.api import f\n",
        "algo/__init__.py": "from .api import f\n", "algo/api.py": "def f():\n    from . import f\n",
        "twin/__init__.py": "", "twin/api.py": "from ..algo.api import f\n",
    })
    found = edges(root, "pkg")
    assert [w.split(":")[0] for w in own_init_violations(found, {"", "algo", "twin"})] == ["pkg/algo/api.py"]
    layers = {"": {"base": 1, "algo": 2, "twin": 2, "": 3}}
    wrong = layer_violations(found, layers, {"": {2}})
    assert any(w.startswith("pkg/base.py:2") for w in wrong)  # up a layer
    assert any(w.startswith("pkg/twin/api.py:1") for w in wrong)  # an independent sibling
    assert not any(w.startswith("pkg/__init__.py") for w in wrong)


@pytest.mark.parametrize("package", sorted(LAYERS))
def test_every_layer_table_names_existing_units(package):
    units = {unit_of(module, package) for module in MODULES if inside(module, package)}
    assert set(LAYERS[package]) <= units | {""}, sorted(set(LAYERS[package]) - units)
