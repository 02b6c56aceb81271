"""Environments hub: get-or-create by (name, team) and ``owner/name@latest`` lookup."""

from __future__ import annotations

import secrets

from ._db import Database, now_iso

LOCAL_OWNER = "local"


class EnvironmentHub:
    def __init__(self, db: Database) -> None:
        self._db = db

    def resolve(self, name: str, team_id: str | None) -> str:
        """The same (name, team) always gets the same id; that is what makes the call replayable."""
        return self.publish(team_id or LOCAL_OWNER, name)

    def publish(self, owner: str, name: str) -> str:
        with self._db.write() as conn:
            row = conn.execute("SELECT id FROM environments WHERE owner = ? AND name = ?", (owner, name)).fetchone()
            if row is not None:
                return str(row["id"])
            env_id = f"env_{secrets.token_hex(8)}"
            conn.execute(
                "INSERT INTO environments (id, owner, name, created_at) VALUES (?, ?, ?, ?)",
                (env_id, owner, name, now_iso()),
            )
            return env_id

    def latest(self, owner: str, name: str) -> str | None:
        with self._db.read() as conn:
            row = conn.execute("SELECT id FROM environments WHERE owner = ? AND name = ?", (owner, name)).fetchone()
        return None if row is None else str(row["id"])
