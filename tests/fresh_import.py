"""What importing a module pulls in, seen from a fresh interpreter."""

from __future__ import annotations

import json
import subprocess
import sys


def modules_after_import(module: str) -> set[str]:
    """The top-level names in ``sys.modules`` of a new Python process after ``import module``
    (the import itself must succeed)."""
    probe = (
        f"import json, sys; import {module}; "
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    return set(json.loads(done.stdout))
