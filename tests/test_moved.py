"""Old import paths keep working after issue 39's moves: the same module, and one DeprecationWarning per path."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from tsmg import _moved

ROOT = __import__("pathlib").Path(__file__).resolve().parent.parent


def _run(code: str) -> dict:
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, cwd=ROOT, check=True
    )
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_every_old_path_is_the_new_module_and_warns_once():
    # In a fresh interpreter: the new module may already be imported (cli imports cli_parser); the old path still warns.
    paths = sorted(_moved.MOVED) + ["tsmg.serve.app", "tsmg.evaluation.exploitability"]
    found = _run(
        f"""
        import importlib, json, warnings
        import tsmg
        from tsmg import _moved
        out = {{}}
        for old in {paths!r}:
            with warnings.catch_warnings(record=True) as first:
                warnings.simplefilter("always")
                module = importlib.import_module(old)
            with warnings.catch_warnings(record=True) as again:
                warnings.simplefilter("always")
                importlib.import_module(old)
            new = _moved.new_path(old)
            messages = [str(w.message) for w in first if w.category is DeprecationWarning]
            messages = [message for message in messages if message.startswith(old + " moved")]
            same = module is importlib.import_module(new)
            out[old] = {{"same": same, "name": module.__name__, "spec": module.__spec__.name,
                        "warned": messages, "again": [str(w.message) for w in again]}}
        print(json.dumps(out))
        """
    )
    for old, seen in found.items():
        new = _moved.new_path(old)
        assert seen["same"] and seen["name"] == new and seen["spec"] == new, (old, seen)
        assert seen["warned"] == [f"{old} moved to {new}; import it from there (the old path will be removed)"], old
        assert seen["again"] == [], old


def test_the_warning_points_at_the_import_that_used_the_old_path(tmp_path):
    user = tmp_path / "user_code.py"
    user.write_text("import training.demo\n")
    result = subprocess.run(
        [sys.executable, "-W", "always::DeprecationWarning", str(user)], capture_output=True, text=True, cwd=ROOT
    )
    assert result.returncode == 0, result.stderr
    assert f"{user}:1: DeprecationWarning: training.demo moved to tsmg.apps.train.demo" in result.stderr


def test_python_dash_m_on_an_old_path_runs_the_new_module(tmp_path):
    result = subprocess.run(
        [sys.executable, "-W", "always::DeprecationWarning", "-m", "tsmg.cli", "games"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stderr
    assert "FrozenLake-v0" in result.stdout
    assert "tsmg.cli moved to tsmg.apps.cli" in result.stderr


def test_a_plugin_written_against_the_old_paths_still_loads(tmp_path):
    plugin = tmp_path / "old_plugin.py"
    plugin.write_text(
        "import tsmg\n"
        "from tsmg.cli_parser import examples  # an old path\n"
        "from tsmg.evaluation.exploitability import ExploitabilityReport  # another\n"
        "tsmg.register('old39/Lake-v0', 'games.frozen_lake:FrozenLake')\n"
    )
    result = subprocess.run(
        [sys.executable, "-m", "tsmg.apps.cli", "--import", str(plugin), "games"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert "old39/Lake-v0" in result.stdout


def test_unmoved_paths_are_left_to_the_ordinary_finders():
    assert _moved.new_path("tsmg.core") is None
    assert _moved.new_path("training.config") is None
    assert _moved.new_path("tsmg.serve_extra") is None  # a prefix of a name is not its package
    assert _moved.new_path("tsmg.serve.app") == "tsmg.apps.serve.app"


def test_every_moved_name_is_the_new_object_and_warns_once():
    # backends.tiny.game_corpus went to training (issue 39 stage 2): the module stayed, the name moved.
    found = _run(
        f"""
        import importlib, json, warnings
        from tsmg import _moved, loading
        out = {{}}
        for old, new in {sorted(_moved.MOVED_NAMES.items())!r}:
            module, _, name = old.rpartition(".")
            with warnings.catch_warnings(record=True) as first:
                warnings.simplefilter("always")
                value = getattr(importlib.import_module(module), name)
            with warnings.catch_warnings(record=True) as again:
                warnings.simplefilter("always")
                getattr(importlib.import_module(module), name)
            out[old] = {{"same": value is loading.load(new), "warned": [str(w.message) for w in first],
                        "again": [str(w.message) for w in again], "file": [w.filename for w in first]}}
        print(json.dumps(out))
        """
    )
    assert set(found) == set(_moved.MOVED_NAMES)
    for old, seen in found.items():
        new = _moved.MOVED_NAMES[old].replace(":", ".")
        assert seen["same"], old
        assert seen["warned"] == [f"{old} moved to {new}; import it from there (the old path will be removed)"], old
        assert seen["again"] == [] and seen["file"] == ["<string>"], old  # the warning points at the caller


def test_a_name_that_never_lived_in_a_module_is_an_attribute_error():
    import backends.tiny

    with pytest.raises(AttributeError, match="module 'backends.tiny' has no attribute 'no_such_name'"):
        backends.tiny.no_such_name  # noqa: B018
