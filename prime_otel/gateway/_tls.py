"""TLS for both receivers: one certificate chain and its private key, as PEM files."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class TlsFiles:
    cert: Path
    key: Path

    @classmethod
    def of(cls, cert: Path | None, key: Path | None) -> TlsFiles | None:
        """The pair, None without either; ``ValueError`` when only one is given or one cannot be read."""
        if cert is None and key is None:
            return None
        if cert is None or key is None:
            raise ValueError("TLS needs both --tls-cert and --tls-key")
        for path in (cert, key):
            if not path.is_file():
                raise ValueError(f"TLS file {path} does not exist")
        return cls(cert, key)
