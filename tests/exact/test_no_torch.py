"""ers-exact must never import torch (it is the torch-free half of ers)."""

import subprocess
import sys


def test_ers_exact_imports_without_torch() -> None:
    code = (
        "import sys, importlib, pkgutil, ers_exact\n"
        "for m in pkgutil.walk_packages(ers_exact.__path__, 'ers_exact.'):\n"
        "    importlib.import_module(m.name)\n"
        "bad = sorted(k for k in sys.modules if k.split('.')[0] in {'torch', 'tensordict', 'torchrl', 'jax'})\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"ers_exact imported {out.stdout.strip()}"
