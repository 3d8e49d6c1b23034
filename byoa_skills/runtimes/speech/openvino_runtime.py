"""OpenVINO's runtime, imported without its model-conversion API.

``import openvino`` also imports ``openvino.tools.ovc`` (``convert_model``, for models of other
frameworks), which loads OpenVINO's TensorFlow frontend and its Python modules: 16 MiB of a
fresh process's memory that a worker, which only reads and compiles OpenVINO's own graphs,
never uses. OpenVINO's package imports that API only where it can; :func:`import_openvino`
keeps it out while the package loads and leaves ``openvino.tools.ovc`` importable afterwards.
"""

from __future__ import annotations

import sys
from types import ModuleType

#: The module ``import openvino`` imports for its model-conversion API.
CONVERSION_API = "openvino.tools.ovc"


def import_openvino() -> ModuleType:
    """The ``openvino`` package, imported now without :data:`CONVERSION_API` where it was not
    imported yet (as it is where it was). Raises ``ImportError`` where OpenVINO is not
    installed."""
    loaded = sys.modules.get("openvino")
    if loaded is not None:
        return loaded
    kept_out = CONVERSION_API not in sys.modules
    if kept_out:
        sys.modules[CONVERSION_API] = None  # type: ignore[assignment]  # its import now fails
    try:
        import openvino
    except ImportError:
        if not kept_out:
            raise
        del sys.modules[CONVERSION_API]
        import openvino  # a version that needs its conversion API to import at all
    finally:
        if kept_out and sys.modules.get(CONVERSION_API, 0) is None:
            del sys.modules[CONVERSION_API]
    return openvino
