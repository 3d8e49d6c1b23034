"""A pool for the length of one test."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from byoa_skills.pool import PoolConfig, WorkerPool


def run_with_pool(config: PoolConfig, body: Callable[[WorkerPool], Awaitable[Any]]) -> Any:
    """Start a pool with ``config``, run ``body(pool)`` on it, close it; ``body``'s result."""

    async def main() -> Any:
        pool = WorkerPool(config)
        await pool.start()
        try:
            return await body(pool)
        finally:
            await pool.close()

    return asyncio.run(main())
