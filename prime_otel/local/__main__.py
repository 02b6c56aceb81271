"""``python -m prime_otel.local``: the same options as ``prime-otel local``."""

from __future__ import annotations

from ._server import main

if __name__ == "__main__":
    main()
