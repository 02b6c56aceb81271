"""Files a run writes whole: a JSON document replaced atomically, so a reader never sees half of it."""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any


def write_json_atomically(path: Path, document: Mapping[str, Any]) -> None:
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            json.dump(document, out, ensure_ascii=False, indent=2)
        os.replace(temporary, path)
    except BaseException:
        # An interrupt (Ctrl-C, SIGTERM) may land just after the replace: the temporary is gone then.
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        raise
