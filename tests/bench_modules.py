"""The bench scripts as modules, for the tests of their pure parts (tables, statistics, configurations)."""

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

BENCH = Path(__file__).resolve().parents[1] / "bench"


def load_bench(name: str) -> ModuleType:
    """``bench/NAME.py`` imported as the module ``NAME`` (registered, so its pickled functions resolve)."""
    spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def flat(data: dict, prefix: str = "") -> dict:
    """A configuration dump as ``section.field`` keys (``params`` and ``game_options`` kept whole)."""
    items = {}
    for key, value in data.items():
        if isinstance(value, dict) and key not in ("params", "game_options"):
            items.update(flat(value, f"{prefix}{key}."))
        else:
            items[f"{prefix}{key}"] = value
    return items
