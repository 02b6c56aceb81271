"""The data directory: database file, objects folder, the API key and the URL-signing secret."""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable
from pathlib import Path


class DataDir:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.root.mkdir(parents=True, exist_ok=True)
        self.objects.mkdir(exist_ok=True)

    @property
    def database(self) -> Path:
        return self.root / "platform.sqlite3"

    @property
    def objects(self) -> Path:
        return self.root / "objects"

    def api_key(self, explicit: str | None = None) -> str:
        """An explicit key wins for this start; otherwise the stored key, generated on first use."""
        if explicit:
            return explicit
        return self._secret_file("api-key", lambda: f"pit_local_{secrets.token_hex(16)}")

    def signing_secret(self) -> bytes:
        return self._secret_file("signing-secret", lambda: secrets.token_hex(32)).encode()

    def _secret_file(self, name: str, generate: Callable[[], str]) -> str:
        path = self.root / name
        try:
            return path.read_text().strip()
        except FileNotFoundError:
            pass
        value = generate()
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            # Another server process on the same directory won the race; use its value.
            return path.read_text().strip()
        with os.fdopen(fd, "w") as handle:
            handle.write(value + "\n")
        return value
