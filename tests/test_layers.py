"""The layer contract: the order the packages import each other in, checked over the import graph.

Layers, lowest first (:data:`LAYERS`: each a set of dotted prefixes, one folder each; a module may
import from its own layer and the layers below, and the longest prefix that matches places it):

1. **kernel** -- ``tsmg.*`` (but the two folders below): tsmg's formal objects: the game API,
   the LAP and the language-model protocol, decisions and policies, the episode record, the
   registry, the checker, seeding, the rollout engine, the run folder, model specs, and
   :mod:`tsmg.loading`, the one helper that imports by string;
2. **backends** -- ``backends.*``: language models behind one protocol, on the kernel alone (a
   tiny model's tokenizer is trained on the catalog's texts, which the training package renders
   for it through the ``tsmg.tiny_corpus`` entry point);
3. **adapters** -- ``tsmg.adapters.*``: games of other libraries (Gymnasium, PettingZoo,
   OpenSpiel, TextArena) made ours, and ours exported to them;
4. **games** -- ``games.*``: the catalog (it registers OpenSpiel's and TextArena's games through
   the adapters);
5. **training** -- ``training.*``: MS-GRPO and its credit assigners, losses, trainer, checkpoints;
6. **applications** -- ``tsmg.apps.*``: what users run: the CLI, evaluation, the viewer, serving
   and its client, the integrations with other trainers, the training commands.

Every import statement counts: at module level, inside functions, under ``TYPE_CHECKING``. Nor may
a module name a module of a layer above its own in a string (``"module:attribute"`` or
``"module"``): where a lower layer must reach a higher one (the registry making an OpenSpiel game
or a served one, a model spec that names a backend or a bot), it keeps a registry that the layer
above fills through an entry point in ``pyproject.toml`` (``tsmg.games``, ``tsmg.namespaces``,
``tsmg.players``, ``tsmg.models``, ``tsmg.tiny_corpus``). The one exemption is the table of moved import paths,
:data:`MOVED_TABLE`.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("tsmg", "games", "backends", "training")

#: The layers, lowest first, each with its dotted prefixes (a prefix covers the module itself and those below it).
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("kernel", ("tsmg",)),
    ("backends", ("backends",)),
    ("adapters", ("tsmg.adapters",)),
    ("games", ("games",)),
    ("training", ("training",)),
    ("applications", ("tsmg.apps",)),
)
#: The table of old import paths and where they moved: the one module of a lower layer that names a higher one.
MOVED_TABLE = "tsmg._moved"

#: The only module that imports by string, and the calls that do (nowhere else may make them).
LOADER = "tsmg.loading"
STRING_IMPORTS = {"import_module", "__import__", "spec_from_file_location", "module_from_spec", "exec_module"}
_REFERENCE = re.compile(r"(?:tsmg|games|backends|training)(?:\.\w+)*(?::[A-Za-z_][\w.]*)?")


@dataclass(frozen=True)
class Edge:
    """One import statement of one module of the packages naming another."""

    source: str
    target: str
    line: int

    def __str__(self) -> str:
        """``module:line -> module`` with both layers."""
        return f"{self.source}:{self.line} ({layer_of(self.source)}) imports {self.target} ({layer_of(self.target)})"


@cache
def modules() -> dict[str, Path]:
    """Every module of the four packages, by dotted name (a package by its own name)."""
    found = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def layer_of(module: str) -> str:
    """The layer of ``module``: the longest prefix of :data:`LAYERS` that covers it wins."""
    best, best_length = "", -1
    for name, prefixes in LAYERS:
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best_length:
                best, best_length = name, len(prefix)
    if not best:
        raise LookupError(f"{module} has no layer: its folder is in no prefix of LAYERS in tests/test_layers.py")
    return best


def _rank(module: str) -> int:
    return [name for name, _ in LAYERS].index(layer_of(module))


def _imported(module: str, node: ast.Import | ast.ImportFrom, is_package: bool) -> list[str]:
    """The modules of the packages an import statement names (``from a import b`` is ``a.b`` if a module)."""
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    else:
        if node.level:
            base = module.split(".") if is_package else module.split(".")[:-1]
            base = base[: len(base) - (node.level - 1)]
            origin = ".".join(base + ([node.module] if node.module else []))
        else:
            origin = node.module or ""
        names = [f"{origin}.{alias.name}" if f"{origin}.{alias.name}" in modules() else origin for alias in node.names]
    known = []
    for name in names:
        while name and name not in modules():  # `import a.b.c` imports a.b.c; `from a import func` names a
            name = name.rpartition(".")[0]
        if name:
            known.append(name)
    return known


@cache
def _tree(module: str) -> ast.Module:
    return ast.parse(modules()[module].read_text(encoding="utf-8"), filename=str(modules()[module]))


@cache
def import_edges() -> tuple[Edge, ...]:
    """Every import of one module of the packages by another, wherever it stands in the file."""
    edges = set()
    for module, path in modules().items():
        for node in ast.walk(_tree(module)):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                for target in _imported(module, node, path.name == "__init__.py"):
                    if target != module:
                        edges.add(Edge(module, target, node.lineno))
    return tuple(sorted(edges, key=lambda edge: (edge.source, edge.line, edge.target)))


def upward_imports(edges: tuple[Edge, ...]) -> list[Edge]:
    """The edges that import from a layer above the importing module's own."""
    return [edge for edge in edges if _rank(edge.target) > _rank(edge.source)]


def import_circles(edges: tuple[Edge, ...]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iteratively)."""
    graph: dict[str, set[str]] = {module: set() for module in modules()}
    for edge in edges:
        graph[edge.source].add(edge.target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    circles.append(sorted(component))
    return circles


def test_every_module_has_a_layer():
    unplaced = []
    for module in modules():
        try:
            layer_of(module)
        except LookupError as error:
            unplaced.append(str(error))
    assert not unplaced, "\n".join(unplaced)


def test_no_module_imports_from_a_layer_above_its_own():
    upward = upward_imports(import_edges())
    hint = "imports against the layer order (name it by string through tsmg.loading instead):"
    assert not upward, "\n".join([hint, *map(str, upward)])


def test_no_import_circles_between_modules():
    circles = import_circles(import_edges())
    assert not circles, "import circles (in-function and TYPE_CHECKING imports count):\n" + "\n".join(
        " <-> ".join(circle) for circle in circles
    )


def test_only_the_loader_imports_by_string():
    offenders = []
    for module in modules():
        if module == LOADER:
            continue
        for node in ast.walk(_tree(module)):
            if isinstance(node, ast.Call):
                function = node.func
                name = function.attr if isinstance(function, ast.Attribute) else getattr(function, "id", "")
                through_loader = isinstance(function, ast.Attribute) and ast.unparse(function.value) == "loading"
                if name in STRING_IMPORTS and not through_loader:
                    offenders.append(f"{module}:{node.lineno} calls {name}")
            if isinstance(node, ast.ImportFrom) and node.module == "importlib.metadata":
                if any(alias.name == "entry_points" for alias in node.names):
                    offenders.append(f"{module}:{node.lineno} reads entry points")
    assert not offenders, "imports by string outside tsmg.loading:\n" + "\n".join(offenders)


def _top_level_names(module: str) -> set[str]:
    names = set()
    for node in _tree(module).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(target.id for target in targets if isinstance(target, ast.Name))
    return names


def _names_a_module(value: str) -> bool:
    """Whether ``value`` is ``"module"`` or ``"module:attribute"`` for a module of the packages."""
    target, colon, attribute = value.partition(":")
    if colon and not re.fullmatch(r"[A-Za-z_][\w.]*", attribute):
        return False
    return bool(_REFERENCE.fullmatch(value)) and (target in modules() or bool(colon))


def string_references() -> list[tuple[str, int, str]]:
    """Every string of the packages naming one of their own modules: ``"module:attribute"`` or ``"module"``."""
    found = []
    for module in modules():
        for node in ast.walk(_tree(module)):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and _names_a_module(node.value):
                found.append((module, node.lineno, node.value))
    return found


def upward_strings(references: list[tuple[str, int, str]]) -> list[str]:
    """The references that name a module of a layer above their own module's."""
    upward = []
    for module, line, value in references:
        if module == MOVED_TABLE:
            continue
        target = value.partition(":")[0]
        if target in modules() and _rank(target) > _rank(module):
            upward.append(f"{module}:{line} ({layer_of(module)}) names {value!r} ({layer_of(target)})")
    return upward


def test_string_references_name_what_exists():
    references = string_references()
    assert any(value == "games.frozen_lake:FrozenLake" for _, _, value in references)  # the scan sees them
    broken = []
    for module, line, value in references:
        target, _, attribute = value.partition(":")
        if target not in modules():
            broken.append(f"{module}:{line} names {value!r}: no module {target}")
        elif attribute and attribute.split(".")[0] not in _top_level_names(target):
            broken.append(f"{module}:{line} names {value!r}: {target} defines no {attribute.split('.')[0]}")
    assert not broken, "\n".join(broken)


def test_no_string_names_a_layer_above_its_module():
    upward = upward_strings(string_references())
    hint = (
        "strings naming a layer above their module's (give the lower layer a registry that the upper one fills: an "
        "entry point in pyproject.toml, as tsmg.namespaces, tsmg.players and tsmg.models do):"
    )
    assert not upward, "\n".join([hint, *upward])


def test_the_string_check_sees_an_upward_string():
    references = [("tsmg.registry", 1, "tsmg.apps.remote:RemoteGame"), ("backends", 2, "training.checkpoint")]
    assert len(upward_strings(references)) == 2
    assert upward_strings([("games.frozen_lake", 1, "tsmg.core:Game")]) == []


def _entry_points() -> dict[str, dict[str, str]]:
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    return {group: dict(entries) for group, entries in project["entry-points"].items()}


def test_the_kernels_registries_are_filled_from_above_by_entry_points_that_exist():
    groups = _entry_points()
    assert {"tsmg.games", "tsmg.namespaces", "tsmg.players", "tsmg.models"} <= set(groups)
    broken = []
    for group, entries in groups.items():
        for name, value in entries.items():
            target, _, attribute = value.partition(":")
            if target not in modules():
                broken.append(f"{group} {name} = {value!r}: no module {target}")
            elif attribute and attribute.split(".")[0] not in _top_level_names(target):
                broken.append(f"{group} {name} = {value!r}: {target} defines no {attribute.split('.')[0]}")
            elif layer_of(target) == "kernel":
                broken.append(f"{group} {name} = {value!r}: the kernel fills its own registries in code")
    assert not broken, "\n".join(broken)


def test_the_checks_see_an_upward_import_and_a_circle():
    # The same functions as above, on edges that break the contract: they must be caught.
    upward = Edge("tsmg.registry", "games.frozen_lake", 1)
    assert upward_imports((upward,)) == [upward]
    assert upward_imports((Edge("games.frozen_lake", "tsmg.core", 1),)) == []
    circle = (
        Edge("training.rollout.sources", "training.rollout.rtpo", 1),
        Edge("training.rollout.rtpo", "training.rollout.sources", 2),
    )
    assert import_circles(circle) == [["training.rollout.rtpo", "training.rollout.sources"]]
    # An in-function import is an edge like any other.
    assert any(edge.source == "tsmg.apps.cli" and edge.target == "tsmg.apps.train.cli" for edge in import_edges())


def test_each_layer_is_its_folders():
    # One folder per layer: every module's layer is its path's, and no folder holds two layers but by a sub-folder.
    for module, path in modules().items():
        folder = ".".join(path.relative_to(ROOT).parent.parts)
        assert layer_of(module) == layer_of(folder), f"{module} is not in its folder's layer"


def test_only_the_moved_table_names_a_layer_above_and_it_names_what_exists():
    from tsmg import _moved

    exempt = [value for module, _, value in string_references() if module == MOVED_TABLE]
    # only its new paths, each a module of the packages (or a name of one, for the names that moved)
    assert sorted(exempt) == sorted([*_moved.MOVED.values(), *_moved.MOVED_NAMES.values()])
    for old, new in _moved.MOVED.items():
        assert old not in modules() and new in modules(), (old, new)
    for old, new in _moved.MOVED_NAMES.items():
        module, name = new.split(":")
        assert old.rpartition(".")[0] in modules() and name in _top_level_names(module), (old, new)
        assert old.rpartition(".")[2] not in _top_level_names(old.rpartition(".")[0]), old  # it left
    assert upward_strings([(MOVED_TABLE, 1, "tsmg.apps.cli"), ("tsmg.registry", 1, "tsmg.apps.cli")]) == [
        "tsmg.registry:1 (kernel) names 'tsmg.apps.cli' (applications)"
    ]


def layer_listing() -> str:
    """The layers as docs/layout.md draws them: per layer, its prefixes and what lies directly in them.

    The kernel, the adapters and the applications name their modules and sub-packages (their
    composition is the point); games, backends and training give their module count.
    """
    import textwrap

    lines = []
    for name, prefixes in LAYERS:
        members = sorted(module for module in modules() if layer_of(module) == name)
        prefix_text = ", ".join(f"{prefix}.*" for prefix in prefixes)
        if name in ("kernel", "adapters", "applications"):
            inside = [module[len(p) + 1 :] for module in members for p in prefixes if module.startswith(p + ".")]
            children = sorted({relative.split(".")[0] for relative in inside})
            body = ", ".join(children)
        else:
            body = f"{len(members)} modules"
        lines.append(textwrap.fill(f"{name:<13}{prefix_text:<17}{body}", width=100, subsequent_indent=" " * 30))
    return "\n".join(lines)


def test_docs_layout_draws_the_layers_of_the_code():
    text = (ROOT / "docs" / "layout.md").read_text(encoding="utf-8")
    drawn = re.search(r"## Layers\n.*?```\n(.*?)\n```", text, re.DOTALL)
    assert drawn is not None, "docs/layout.md has no ``` block under ## Layers"
    expected = layer_listing()
    assert drawn.group(1) == expected, "docs/layout.md's layers differ from the code; draw them as:\n" + expected


def test_the_layers_are_in_the_stated_order():
    assert [name for name, _ in LAYERS] == ["kernel", "backends", "adapters", "games", "training", "applications"]
    assert layer_of("tsmg.policies") == "kernel"
    assert layer_of("tsmg.adapters.openspiel") == "adapters"
    assert layer_of("tsmg.apps") == "applications"
    assert layer_of("tsmg.apps.train.cli") == "applications"
    assert layer_of("tsmg.apps.evaluation.cli") == "applications"
    assert layer_of("tsmg.apps.remote") == "applications"
    assert layer_of("tsmg.apps.serve.app") == "applications"


@pytest.mark.parametrize(
    ("module", "names"),
    [
        ("tsmg", ["make", "register", "spec", "specs", "Game", "RulesGame", "GameSpec", "UnknownGameError"]),
        (
            "tsmg.policies",
            ["Decision", "DecisionRequest", "Turn", "Policy", "RandomPolicy", "FixedPolicy", "policy_from_spec"],
        ),
        ("tsmg.apps.cli", ["main", "report_error", "validation_problems", "one_line"]),
        ("training.setup", ["set_up", "base_model_source", "tiny_corpus", "BASE_MODEL_DIR", "load_backend"]),
        ("training.trainer", ["train", "base_model_source", "TrainHooks", "build_rollouts"]),
        ("training.rollout.sources", ["GroupRollouts", "RolloutSource", "SAMPLER"]),
        ("training.checkpoint", ["checkpoint_weights", "run_checkpoints"]),
        ("backends", ["load_model", "BackendError", "LanguageModel"]),
    ],
)
def test_public_names_still_import(module, names):
    imported = __import__(module, fromlist=names)
    missing = [name for name in names if not hasattr(imported, name)]
    assert not missing, f"{module} lost {missing}"
