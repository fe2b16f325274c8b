import subprocess
import sys


def test_import_tsmg_loads_no_heavy_or_catalog_module():
    code = (
        "import sys, tsmg, tsmg.lap, tsmg.rollout, tsmg.checker, tsmg.apps.cli;"
        "heavy = ('torch', 'transformers', 'vllm', 'games', 'backends', 'training', 'pyspiel');"
        "heavy = [m for m in heavy if m in sys.modules];"
        "print(heavy)"
    )
    output = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert output.strip() == "[]"
