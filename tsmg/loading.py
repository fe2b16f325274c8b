"""The one way to import by name: ``"module:attribute"`` references, module names, files, entry points.

The packages sit in layers (the kernel, then games, backends, training, the applications;
``tests/test_layers.py`` holds the table). No file imports from a layer above its own. Where a
lower layer must reach something above it (the registry making a game of the catalog or of a
namespace such as ``openspiel:``, a model spec that names a backend or a bot), it keeps a registry
that the layer above fills, naming itself in an entry point of ``pyproject.toml`` (read here, by
:func:`plugin_entries`) or registering on import; this module imports what an entry names when it
is first needed, as Gymnasium's registry does with ``"module:Class"``. No source file of a lower
layer names a higher one, not even in a string (``tests/test_layers.py``).

Every import by string of the packages goes through here, and nowhere else calls
``importlib.import_module``, ``__import__`` or ``importlib.metadata.entry_points``: the layer test
checks that, so the import graph it reads from the source is the whole graph.
"""

from __future__ import annotations

import functools
import importlib
import importlib.machinery
import importlib.util
import os
import re
import sys
from dataclasses import dataclass
from importlib.metadata import entry_points
from pathlib import Path
from types import ModuleType
from typing import Any


def load(reference: str) -> Any:
    """The object a ``"module:attribute"`` reference names (the module imported now, if it is not yet).

    Args:
        reference: ``"package.module:name"`` (``name`` may be dotted: ``"module:Class.method"``), or
            a bare ``"package.module"`` for the module itself, as entry points allow.

    Raises:
        ValueError: The reference is empty, or ends at its colon.
        ImportError: The module cannot be imported (``ModuleNotFoundError.name`` says which module).
        AttributeError: The module has no such attribute.

    Example:
        >>> load("tsmg.registry:make").__name__
        'make'
    """
    module_name, colon, attribute = reference.partition(":")
    if not module_name.strip() or (colon and not attribute.strip()):
        raise ValueError(f"a reference is 'module:attribute' or 'module', got {reference!r}")
    target: Any = import_module(module_name.strip())
    for part in attribute.strip().split(".") if colon else ():
        target = getattr(target, part)
    return target


def import_module(name: str) -> ModuleType:
    """Import the module ``name`` (``"pkg.module"``) and return it."""
    return importlib.import_module(name)


def find_spec(name: str) -> importlib.machinery.ModuleSpec | None:
    """The spec of the module ``name`` without importing it (its parent packages are imported), or None."""
    return importlib.util.find_spec(name)


def import_file(path: str) -> ModuleType:
    """Import a ``.py`` file as a module named after the file (kept in ``sys.modules``).

    Raises:
        FileNotFoundError: No such file.
    """
    module_spec = importlib.util.spec_from_file_location(os.path.basename(path).removesuffix(".py"), path)
    if module_spec is None or module_spec.loader is None or not os.path.exists(path):
        raise FileNotFoundError(path)
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[module_spec.name] = module
    module_spec.loader.exec_module(module)
    return module


@dataclass(frozen=True)
class PluginEntry:
    """One entry point of a group: its name and the ``"module:attribute"`` (or ``"module"``) it names."""

    name: str
    reference: str


_ENTRY = re.compile(r"^\s*(?P<reference>[\w.]+\s*(?::\s*[\w.]+)?)\s*(?:\[[^\]]*\])?\s*$")


def plugin_entries(group: str) -> list[PluginEntry]:
    """The entry points installed distributions declare in ``group``, and those of the source tree being run.

    The source tree: when this ``tsmg`` package is imported from a checkout (a ``pyproject.toml``
    of the project ``tsmg`` beside the package), its declarations replace those of an installed
    ``tsmg`` distribution, whose metadata is a copy made at install time (stale after an edit, or
    absent in a tree never installed). Other distributions' entries are kept as installed.
    """
    source = _source_tree_entries(group)
    found = []
    for entry in entry_points(group=group):
        distribution = getattr(getattr(entry, "dist", None), "name", None)
        if source is not None and distribution == "tsmg":
            continue
        found.append(PluginEntry(entry.name, f"{entry.module}:{entry.attr}" if entry.attr else entry.module))
    for name, value in (source or {}).items():
        match = _ENTRY.match(value)
        if match is None:
            raise ValueError(f"pyproject.toml: entry point {name} = {value!r} of {group} is not 'module:attribute'")
        found.append(PluginEntry(name, re.sub(r"\s+", "", match.group("reference"))))
    return found


def plugin_references(group: str) -> list[str]:
    """The references (``"module:attribute"`` or ``"module"``) of an entry-point group (:func:`plugin_entries`).

    Load each with :func:`load`: the distribution above names itself here, and nothing below it
    imports it by name.
    """
    return [entry.reference for entry in plugin_entries(group)]


@functools.cache
def _source_tree_pyproject() -> dict[str, Any] | None:
    """The ``[project]`` table of the checkout this package is imported from, or None (an installed package)."""
    path = Path(__file__).resolve().parent.parent / "pyproject.toml"
    if not path.is_file():
        return None
    import tomllib

    try:
        project = tomllib.loads(path.read_text(encoding="utf-8")).get("project", {})
    except (OSError, tomllib.TOMLDecodeError):
        return None
    return project if project.get("name") == "tsmg" else None


def _source_tree_entries(group: str) -> dict[str, str] | None:
    """The entry points the source tree's ``pyproject.toml`` declares in ``group`` (None: not run from a checkout)."""
    project = _source_tree_pyproject()
    if project is None:
        return None
    return {str(name): str(value) for name, value in project.get("entry-points", {}).get(group, {}).items()}


def install_hint(name: str) -> str:
    """``": pip install 'tsmg[EXTRA]'"`` when tsmg has an extra named ``name`` (or its first ``-`` part), else "".

    For the one sentence said when a registered namespace or kind of player needs a library that
    is missing (``openspiel`` -> ``tsmg[openspiel]``); read from the source tree's or the installed
    metadata, only on that error path.
    """
    project = _source_tree_pyproject()
    if project is not None:
        extras = set(project.get("optional-dependencies", {}))
    else:
        from importlib.metadata import PackageNotFoundError, metadata

        try:
            extras = set(metadata("tsmg").get_all("Provides-Extra") or [])
        except PackageNotFoundError:
            extras = set()
    for candidate in (name, name.split("-")[0]):
        if candidate in extras:
            return f": pip install 'tsmg[{candidate}]'"
    return ""
