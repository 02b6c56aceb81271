"""``make demo``: start the local Prime platform, run the eval and training examples through prime-otel, and leave
every printed link openable.

The demo serves the same data folder on the same port as ``make local`` (``./.prime-otel``, port 8787), so the
links it prints open again after it stops, once ``make local`` runs. The viewer never gets the API key in a link:
the demo prints a one-time sign-in link that signs your browser in, after which the run links open directly.

Environment: ``PRIME_OTEL_DEMO_DATA`` (data folder), ``PRIME_OTEL_DEMO_PORT`` (port; 0 picks a free one),
``PRIME_OTEL_DEMO_SERVE=1`` keeps serving until Ctrl-C even without a terminal (it does with one).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from prime_otel.testing import LocalPlatform, start_local_platform

HERE = Path(__file__).parent
DEFAULT_PORT = 8787


def _port_is_free(port: int) -> bool:
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _running_platform(data_dir: Path, port: int) -> str | None:
    """The URL of a local platform already serving this data folder on ``port`` (``make local``), if one is."""
    key_file = data_dir / "api-key"
    if not key_file.is_file():
        return None
    url = f"http://127.0.0.1:{port}"
    try:
        answer = httpx.get(
            f"{url}/_local/settings", headers={"Authorization": f"Bearer {key_file.read_text().strip()}"}, timeout=2
        )
    except httpx.HTTPError:
        return None
    return url if answer.status_code == 200 else None


def _sign_in_url(url: str, api_key: str) -> str:
    answer = httpx.post(f"{url}/_viewer/logins", headers={"Authorization": f"Bearer {api_key}"}, timeout=10)
    answer.raise_for_status()
    return f"{url}{answer.json()['path']}"


def _run_examples(env: dict[str, str]) -> int:
    with tempfile.TemporaryDirectory() as home:
        env = {**env, "HOME": home, "PRIME_TEAM_ID": "team_local"}  # never a real ~/.prime/config.json
        codes = [
            subprocess.run([sys.executable, str(HERE / script)], env=env, check=False).returncode
            for script in ("eval.py", "train.py")
        ]
    return max(codes)


def _serve_until_interrupted() -> None:
    print("Serving until Ctrl-C ...", flush=True)
    # Ctrl-C reaches the whole process group (the server too); SIGTERM from a supervisor stops it the same way.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    with contextlib.suppress(KeyboardInterrupt):
        while True:
            time.sleep(3600)


def main() -> int:
    data_dir = Path(os.environ.get("PRIME_OTEL_DEMO_DATA") or HERE.parent / ".prime-otel").resolve()
    port = int(os.environ.get("PRIME_OTEL_DEMO_PORT", DEFAULT_PORT))
    data_dir.mkdir(parents=True, exist_ok=True)
    reopen = f"run `make local` to browse these runs again (data in {data_dir})"

    platform: LocalPlatform | None = None
    url = _running_platform(data_dir, port) if port and not _port_is_free(port) else None
    if url is not None:
        api_key = (data_dir / "api-key").read_text().strip()
        print(f"Using the local platform already serving {data_dir} at {url}", flush=True)
    else:
        if port and not _port_is_free(port):
            print(f"Port {port} is in use by something else; the demo's platform takes a free port.", flush=True)
            port, reopen = 0, f"{reopen}; its links will then be on port {DEFAULT_PORT}"
        platform = start_local_platform(data_dir, port=port)
        url, api_key = platform.url, platform.api_key
    try:
        sign_in = _sign_in_url(url, api_key)
        print(f"Local platform: {url}  (data in {data_dir})", flush=True)
        print(f"Open this once to sign your browser in to the viewer: {sign_in}\n", flush=True)
        env = {
            **os.environ,
            "PRIME_API_KEY": api_key,
            "PRIME_API_BASE_URL": url,
            "PRIME_TRACES_URL": url,
            "PRIME_FRONTEND_URL": url,
        }
        code = _run_examples(env)
        print(f"\nViewer: {url}/  (sign in first with {sign_in}; the run links above then open directly)")
        if platform is None:
            print(f"The runs are in the platform you started; it keeps serving them at {url}/")
        elif sys.stdin.isatty() or os.environ.get("PRIME_OTEL_DEMO_SERVE") == "1":
            _serve_until_interrupted()
            print(f"\nStopped: {reopen}.")
        else:
            print(f"The demo's platform stops now: {reopen}.")
        return code
    finally:
        if platform is not None:
            platform.stop()


if __name__ == "__main__":
    sys.exit(main())
