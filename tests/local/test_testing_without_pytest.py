"""``prime_otel.testing`` is documented for use outside pytest: its helpers work where pytest cannot be imported."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

PROGRAM = """\
import sys
sys.path.insert(0, {repo!r})


class NoPytest:
    def find_spec(self, name, path=None, target=None):
        if name == "pytest" or name.startswith(("pytest.", "_pytest")):
            raise ModuleNotFoundError("No module named 'pytest' (made unimportable by this test)")
        return None


sys.meta_path.insert(0, NoPytest())
from prime_otel.testing import start_local_platform

with start_local_platform({data!r}) as platform:
    print("RUNS", len(platform.inspect.runs()), "PYTEST", "pytest" in sys.modules)
"""


def test_start_local_platform_works_where_pytest_cannot_be_imported(tmp_path: Path) -> None:
    program = PROGRAM.format(repo=str(REPO), data=str(tmp_path / "platform"))
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "RUNS 0 PYTEST False"
