"""The memory a recording leaves behind, given back to the system once it is done.

Decoding and cutting allocate and free blocks of a few megabytes, from several threads; the C
allocator (glibc's malloc) keeps what is freed in its heaps, so the process would stay that
much larger after each recording. :func:`give_back_free_memory` asks it to return the free
pages (``malloc_trim``); where the C library has no such call, it does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
from typing import Any


def give_back_free_memory() -> bool:
    """Return the C allocator's free memory to the system; whether it could be asked."""
    trim = _malloc_trim()
    if trim is None:
        return False
    trim(0)
    return True


@functools.lru_cache(maxsize=1)
def _malloc_trim() -> Any:
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name) if name else None
        trim = getattr(libc, "malloc_trim", None)
    except OSError:
        return None
    if trim is not None:
        trim.argtypes = [ctypes.c_size_t]
        trim.restype = ctypes.c_int
    return trim
