"""The registry under concurrency: many threads making games at once on a fresh interpreter."""

import subprocess
import sys
import textwrap


def test_first_makes_from_many_threads_all_see_the_catalog():
    # A fresh interpreter, so the entry points are loaded by the racing threads themselves.
    code = textwrap.dedent(
        """
        from concurrent.futures import ThreadPoolExecutor
        import tsmg

        def make(_):
            return tsmg.make("FrozenLake-v0").game_id

        with ThreadPoolExecutor(64) as pool:
            ids = list(pool.map(make, range(64)))
        assert ids == ["FrozenLake-v0"] * 64, ids
        print("ok")
        """
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "ok"
