"""The import paths that moved (issue 39: layer folders, training.rollout), and the finder that keeps them working.

:data:`MOVED` is the one table of old dotted paths and where they went; a path below an old
package moved with it (``tsmg.serve.app`` is ``tsmg.apps.serve.app``). ``import tsmg`` installs
:class:`MovedFinder` at the front of ``sys.meta_path`` (it costs a dictionary look-up per import
and imports nothing itself), so that ``import training.cli`` returns the very module object of
``tsmg.apps.train.cli`` (one module, one set of globals: a patch through either name is seen by
both) and warns once per old path with a :class:`DeprecationWarning` naming the new one.
:data:`MOVED_NAMES` does the same for a name that left a module that stayed
(``backends.tiny.game_corpus``): the old module's ``__getattr__`` asks :func:`moved_attribute`.

This is the only module of the kernel that names the layers above it, and only as the strings of
the tables: ``tests/test_layers.py`` exempts exactly this module from the string check.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import warnings
from collections.abc import Sequence
from types import ModuleType
from typing import Any

from tsmg import loading

#: Old dotted path -> new dotted path (a package's submodules follow it).
MOVED: dict[str, str] = {
    "training.async_loop": "training.rollout.async_loop",
    "training.cli": "tsmg.apps.train.cli",
    "training.demo": "tsmg.apps.train.demo",
    "training.dynamic_sampling": "training.rollout.dynamic_sampling",
    "training.engines": "training.rollout.engines",
    "training.export": "tsmg.apps.train.export",
    "training.rollout_sources": "training.rollout.build",
    "training.rtpo": "training.rollout.rtpo",
    "training.selfplay": "training.rollout.selfplay",
    "training.sft_cli": "tsmg.apps.train.sft_cli",
    "training.sources": "training.rollout.sources",
    "training.tree": "training.rollout.tree",
    "training.vllm_sync": "training.rollout.vllm_sync",
    "tsmg.adapters.openspiel_exploitability": "tsmg.adapters.openspiel_tabular",
    "tsmg.apps.evaluation.exploitability": "games.kuhn_poker_exploitability",
    "tsmg.apps.openspiel_exploitability": "tsmg.adapters.openspiel_tabular",
    "tsmg.cli": "tsmg.apps.cli",
    "tsmg.cli_parser": "tsmg.apps.cli_parser",
    "tsmg.evaluation": "tsmg.apps.evaluation",
    "tsmg.integrations": "tsmg.apps.integrations",
    "tsmg.remote": "tsmg.apps.remote",
    "tsmg.serve": "tsmg.apps.serve",
    "tsmg.view": "tsmg.apps.view",
}
#: Old dotted path of a module-level name -> its new ``"module:name"`` (the old module's
#: ``__getattr__`` asks :func:`moved_attribute`; the module itself stayed).
MOVED_NAMES: dict[str, str] = {
    "backends.tiny.game_corpus": "training.tiny_corpus:game_corpus",
}
_ROOTS = frozenset(old.split(".")[0] for old in MOVED)
_warned: set[str] = set()


def new_path(old: str) -> str | None:
    """Where the module ``old`` moved (``tsmg.serve.app`` -> ``tsmg.apps.serve.app``), or None if it did not.

    The longest old prefix wins, and a path that moved twice goes to where it is now
    (``tsmg.evaluation.exploitability`` -> ``tsmg.apps.evaluation.exploitability`` ->
    ``games.kuhn_poker_exploitability``).
    """
    if old.partition(".")[0] not in _ROOTS:
        return None
    prefixes = [prefix for prefix in MOVED if old == prefix or old.startswith(prefix + ".")]
    if not prefixes:
        return None
    prefix = max(prefixes, key=len)
    moved = MOVED[prefix] + old[len(prefix) :]
    return new_path(moved) or moved


def moved_attribute(module: str, name: str) -> Any:
    """The name ``module.name`` that moved (:data:`MOVED_NAMES`), warning once; for the old module's ``__getattr__``.

    Raises:
        AttributeError: ``module`` has no such name, and none moved away from it.
    """
    old = f"{module}.{name}"
    new = MOVED_NAMES.get(old)
    if new is None:
        raise AttributeError(f"module {module!r} has no attribute {name!r}")
    if old not in _warned:
        _warned.add(old)
        warnings.warn(
            f"{old} moved to {new.replace(':', '.')}; import it from there (the old path will be removed)",
            DeprecationWarning,
            stacklevel=3,  # the caller of the module's __getattr__
        )
    return loading.load(new)


class _Alias(importlib.abc.Loader):
    """Loads an old path as the module of its new path (imported now), restoring that module's own spec."""

    def __init__(self, old: str, new: str) -> None:
        self.old, self.new = old, new
        self.real_spec: importlib.machinery.ModuleSpec | None = None

    def _warn(self) -> None:
        if self.old not in _warned:
            _warned.add(self.old)
            warnings.warn(
                f"{self.old} moved to {self.new}; import it from there (the old path will be removed)",
                DeprecationWarning,
                stacklevel=_caller_level(),
            )

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        """The new path's module itself (the import system then files it under the old name too)."""
        self._warn()
        module = loading.import_module(self.new)
        self.real_spec = module.__spec__  # the import system writes the old path's spec over it next
        return module

    def get_code(self, fullname: str) -> Any:
        """The new module's code, for ``python -m OLD_PATH`` (runpy runs it as ``__main__``, as ``-m NEW_PATH``)."""
        self._warn()
        spec = loading.find_spec(self.new)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "get_code"):
            raise ImportError(f"{self.new} (the new path of {self.old}) has no code to run")
        return spec.loader.get_code(self.new)

    def exec_module(self, module: ModuleType) -> None:
        """Nothing to run (the new module ran when imported): give the module back its own ``__spec__``."""
        if self.real_spec is not None:
            module.__spec__ = self.real_spec


class MovedFinder(importlib.abc.MetaPathFinder):
    """Finds an old import path of :data:`MOVED` and answers with its new module."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None = None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        """A spec that loads ``fullname``'s new module, when ``fullname`` moved; else None (the next finder looks)."""
        new = new_path(fullname)
        if new is None:
            return None
        return importlib.machinery.ModuleSpec(fullname, _Alias(fullname, new), is_package=False)


def _caller_level() -> int:
    """The stack level of the frame that wrote the ``import`` (``warnings`` itself skips importlib's frames)."""
    frame: Any = sys._getframe(2)  # the caller of create_module
    level = 2
    while frame is not None and frame.f_code.co_filename.startswith("<frozen importlib"):
        frame = frame.f_back
    while frame is not None and frame.f_code.co_filename == __file__:  # pragma: no cover - never nested today
        frame, level = frame.f_back, level + 1
    return level


def install() -> None:
    """Put :class:`MovedFinder` first on ``sys.meta_path`` (once)."""
    if not any(isinstance(finder, MovedFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, MovedFinder())
