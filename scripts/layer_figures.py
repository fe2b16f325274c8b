"""The import graph's figures, for issue 39's before/after: modules, edges, upward edges, circles, lines per layer.

Reads the graph through ``tests/test_layers.py`` (the layer test's own machinery). Lines are every
line of every ``.py`` file, grouped as the issue counts them: the kernel (``tsmg/`` without its
adapters and applications), the adapters, the applications (``tsmg/apps/``, or before the move the
modules that went there), games, backends and training. Ends with one line holding a JSON object.

    PYTHONPATH=$PWD python scripts/layer_figures.py
"""

from __future__ import annotations

import ast
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

import test_layers as layers  # noqa: E402  (the test module is found only once tests/ is on the path)

#: The applications before the move (issue 39, stage 1), so the same script measures both sides.
_OLD_APPLICATIONS = (
    "tsmg.evaluation",
    "tsmg.view",
    "tsmg.serve",
    "tsmg.integrations",
    "tsmg.cli",
    "tsmg.remote",
    "training.cli",
    "training.sft_cli",
    "training.demo",
    "training.export",
    "tsmg.adapters.openspiel_exploitability",
    "tsmg.apps",
)


def group(module: str) -> str:
    """The group a module's lines count in."""
    if any(module == prefix or module.startswith(prefix + ".") for prefix in _OLD_APPLICATIONS):
        return "applications"
    if module == "tsmg.adapters" or module.startswith("tsmg.adapters."):
        return "adapters"
    top = module.split(".")[0]
    return "kernel" if top == "tsmg" else top


def upward_strings() -> list[str]:
    """String constants of a module naming a module (or ``module:attribute``) of a layer above it.

    The table of moved import paths (``tsmg._moved``, where it exists) is left out: the layer test exempts it.
    """
    found = []
    for module in layers.modules():
        if module == getattr(layers, "MOVED_TABLE", None):
            continue
        for node in ast.walk(layers._tree(module)):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                target = node.value.partition(":")[0]
                if target in layers.modules() and layers._rank(target) > layers._rank(module):
                    found.append(f"{module}:{node.lineno} {node.value}")
    return found


def main() -> None:
    """Print the figures, one JSON object on the last line."""
    lines: dict[str, int] = {}
    sizes = []
    for module, path in layers.modules().items():
        count = len(path.read_text(encoding="utf-8").splitlines())
        lines[group(module)] = lines.get(group(module), 0) + count
        sizes.append((count, module))
    edges = layers.import_edges()
    figures = {
        "modules": len(layers.modules()),
        "edges": len(edges),
        "upward_imports": len(layers.upward_imports(edges)),
        "circles": len(layers.import_circles(edges)),
        "upward_strings": upward_strings(),
        "lines": dict(sorted(lines.items())),
        "total_lines": sum(lines.values()),
        "biggest": [f"{module} {count}" for count, module in sorted(sizes, reverse=True)[:5]],
    }
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
