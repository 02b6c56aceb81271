"""``make demo``: start the local Prime platform, run the eval example through prime-otel, show the result."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from prime_otel.testing import start_local_platform

HERE = Path(__file__).parent


def main() -> int:
    data_dir = Path(os.environ.get("PRIME_OTEL_DEMO_DATA", HERE.parent / ".prime-otel" / "demo"))
    data_dir.mkdir(parents=True, exist_ok=True)
    platform = start_local_platform(data_dir)
    try:
        env = {**os.environ, **platform.env}
        with tempfile.TemporaryDirectory() as home:
            env["HOME"] = home  # the demo must not pick up a real ~/.prime/config.json
            env["PRIME_TEAM_ID"] = "team_local"
            codes = [
                subprocess.run([sys.executable, str(HERE / script)], env=env, check=False).returncode
                for script in ("eval.py", "train.py")
            ]
        print(f"\nLocal platform viewer: {platform.url}/  (the key is in {data_dir / 'api-key'})")
        if sys.stdin.isatty():
            print("Serving until Ctrl-C ...")
            with contextlib.suppress(KeyboardInterrupt):
                while True:
                    time.sleep(3600)
        return max(codes)
    finally:
        platform.stop()


if __name__ == "__main__":
    sys.exit(main())
