"""Training sample objects: presigned URLs on this server, the storage PUT, confirm, and Parquet decoding.

Each presign mints a fresh key bound to one (run, step). Objects are additive per step unless the
server runs in ``single`` mode, where a later confirm supersedes the earlier objects of that step
(additive is what the released SDK assumes: the viewer shows the union of a step's objects).
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import hashlib
import hmac
import io
import math
import os
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

from ._db import Database, now_iso
from ._errors import PlatformError

_MAX_EXPIRES_DIGITS = 12


def _decimal(text: str) -> bool:
    """ASCII digits only, and few enough to be a time (``"²"`` is a digit to ``str.isdigit``)."""
    return text.isascii() and text.isdigit() and len(text) <= _MAX_EXPIRES_DIGITS


class UrlSigner:
    def __init__(self, secret: bytes) -> None:
        self._secret = secret

    def sign(self, method: str, key: str, expires: int) -> str:
        message = f"{method.upper()}\n{key}\n{expires}".encode()
        return hmac.new(self._secret, message, hashlib.sha256).hexdigest()

    def check(self, method: str, key: str, expires: str | None, signature: str | None) -> None:
        """Raises 403 for a missing, forged or expired signature, like object storage does."""
        if not expires or not signature or not _decimal(expires) or not signature.isascii():
            raise PlatformError(403, "Missing or malformed signature")
        expected = self.sign(method, key.encode("utf-8", "replace").decode("utf-8"), int(expires))
        if not hmac.compare_digest(expected.encode(), signature.encode()):
            raise PlatformError(403, "The request signature does not match")
        if int(expires) < time.time():
            raise PlatformError(403, "Request has expired")


class ObjectStore:
    def __init__(self, db: Database, root: Path, signer: UrlSigner) -> None:
        self._db = db
        self._root = root
        self._signer = signer

    def presign(self, run_id: str, step: int, origin: str, ttl: int) -> tuple[str, str]:
        """Returns ``(url, key)``; the key is new on every call."""
        with self._db.write() as conn:
            seq = Database.next_values(conn, f"objects:{run_id}")
            key = f"rft-samples/{run_id}/step_{step}_{seq:04d}.parquet"
            conn.execute(
                "INSERT INTO objects (key, run_id, step, created_at) VALUES (?, ?, ?, ?)",
                (key, run_id, step, now_iso()),
            )
        expires = int(time.time()) + ttl
        signature = self._signer.sign("PUT", key, expires)
        return f"{origin}/_objects/{quote(key)}?expires={expires}&signature={signature}", key

    def run_of(self, key: str) -> str | None:
        with self._db.read() as conn:
            row = conn.execute("SELECT run_id FROM objects WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row["run_id"])

    def authorize_put(self, key: str, expires: str | None, signature: str | None) -> None:
        """Raises 403 (bad signature) or 404 (no such key) before anything of the body is read."""
        self._signer.check("PUT", key, expires, signature)
        if self.run_of(key) is None:
            raise PlatformError(404, "No such key")

    def put(self, key: str, expires: str | None, signature: str | None, body: bytes) -> str:
        """Stores the bytes of a presigned key; returns the ETag."""
        self.authorize_put(key, expires, signature)
        path = self._root / key
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(path.name + ".partial")
        partial.write_bytes(body)
        os.replace(partial, path)
        with self._db.write() as conn:
            conn.execute(
                "UPDATE objects SET uploaded_at = ?, bytes = ?, rows = ? WHERE key = ?",
                (now_iso(), len(body), _parquet_rows(body), key),
            )
        return hashlib.md5(body).hexdigest()

    def confirm(self, run_id: str, step: int, key: str, single_object_per_step: bool) -> None:
        """Registers the object for (run, step); confirming the same key again changes nothing."""
        with self._db.write() as conn:
            row = conn.execute("SELECT * FROM objects WHERE key = ?", (key,)).fetchone()
            if row is None or row["run_id"] != run_id:
                raise PlatformError(400, f"Unknown object key for run {run_id}: {key}")
            if row["step"] != step:
                raise PlatformError(400, f"Object {key} was presigned for step {row['step']}, not {step}")
            if row["uploaded_at"] is None:
                raise PlatformError(400, f"Object {key} was not uploaded")
            if row["confirmed_at"] is not None:
                return
            now = now_iso()
            conn.execute("UPDATE objects SET confirmed_at = ? WHERE key = ?", (now, key))
            if single_object_per_step:
                conn.execute(
                    "UPDATE objects SET superseded_at = ? WHERE run_id = ? AND step = ? AND key != ? "
                    "AND confirmed_at IS NOT NULL AND superseded_at IS NULL",
                    (now, run_id, step, key),
                )

    def confirmed(self, run_id: str, step: int | None = None) -> list[dict[str, Any]]:
        """The objects a viewer shows: confirmed and not superseded, by step then confirmation."""
        query = (
            "SELECT step, key, rows, bytes, confirmed_at FROM objects WHERE run_id = ? "
            "AND confirmed_at IS NOT NULL AND superseded_at IS NULL"
        )
        params: tuple[Any, ...] = (run_id,)
        if step is not None:
            query += " AND step = ?"
            params += (step,)
        with self._db.read() as conn:
            rows = conn.execute(query + " ORDER BY step, confirmed_at, key", params).fetchall()
        return [dict(row) for row in rows]

    def steps(self, run_id: str) -> list[dict[str, Any]]:
        steps: dict[int, dict[str, Any]] = {}
        for obj in self.confirmed(run_id):
            entry = steps.setdefault(obj["step"], {"step": obj["step"], "num_rows": 0, "objects": []})
            entry["num_rows"] += obj["rows"] or 0
            entry["objects"].append({"key": obj["key"], "rows": obj["rows"], "bytes": obj["bytes"]})
        return list(steps.values())

    def step_rows(self, run_id: str, step: int, offset: int, limit: int) -> tuple[int, list[dict[str, Any]]]:
        import pyarrow.parquet as pq

        rows: list[dict[str, Any]] = []
        for obj in self.confirmed(run_id, step):
            try:
                table = pq.read_table(self._root / obj["key"])
            except Exception:  # an object that is not Parquet has no rows to show
                continue
            rows.extend(json_safe(row) for row in table.to_pylist())
        return len(rows), rows[offset : offset + limit]


def _parquet_rows(body: bytes) -> int | None:
    import pyarrow.parquet as pq

    try:
        return int(pq.ParquetFile(io.BytesIO(body)).metadata.num_rows)
    except Exception:  # storage accepts any bytes; only Parquet has a row count
        return None


def json_safe(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, (dt.datetime, dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, dt.timedelta):
        return value.total_seconds()
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, bytes):
        try:
            return value.decode()
        except UnicodeDecodeError:
            return base64.b64encode(value).decode()
    return value
