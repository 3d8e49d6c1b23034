"""The reference site for the tests that connect the engine to a site."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from byoa_skills.demos.site.app import start_site
from byoa_skills.demos.site.demo import SiteDemo


def with_site(body: Callable[[SiteDemo], Awaitable[Any]], **options: Any) -> Any:
    """Run ``body(demo)`` with the reference site listening on ``localhost``; its result."""

    async def main() -> Any:
        runner, _, demo = await start_site(host="localhost", **options)
        try:
            return await body(demo)
        finally:
            await demo.close()
            await runner.cleanup()

    return asyncio.run(main())


async def until(condition: Callable[[], bool], what: str, seconds: float = 30) -> None:
    """Wait for a state (not a measurement); fail naming ``what`` after ``seconds``."""
    for _ in range(int(seconds / 0.05)):
        if condition():
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"gave up waiting for {what}")
