"""The one way to import by name: ``"module:attribute"`` references, module names, files, entry points.

The packages sit in layers (the kernel, then games, backends, training, the applications;
``tests/test_layers.py`` holds the table). No file imports from a layer above its own. Where a
lower layer must reach something above it (the registry making a game of the catalog, a model
spec that names a backend, an OpenSpiel id), it names the thing by a string and this module
imports it when it is first needed, as Gymnasium's registry does with ``"module:Class"``; the
layer above registers itself (an entry point of the distribution, or a registration module).

Every import by string of the packages goes through here, and nowhere else calls
``importlib.import_module``, ``__import__`` or ``importlib.metadata.entry_points``: the layer test
checks that, so the import graph it reads from the source is the whole graph.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from importlib.metadata import entry_points
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


def plugin_references(group: str) -> list[str]:
    """The references (``"module:attribute"`` or ``"module"``) installed distributions declare in an entry-point group.

    Load each with :func:`load`: the distribution above names itself here, and nothing below it
    imports it by name.
    """
    return [f"{entry.module}:{entry.attr}" if entry.attr else entry.module for entry in entry_points(group=group)]
