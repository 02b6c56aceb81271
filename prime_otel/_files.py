"""Files a run writes whole: a JSON document replaced atomically, so a reader never sees half of it."""

from __future__ import annotations

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
        os.unlink(temporary)
        raise
