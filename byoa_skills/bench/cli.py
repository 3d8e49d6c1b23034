"""``byoa-bench``: not built yet; it says so and exits 2."""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    """Print that the benchmark harness is not available in this version; return 2."""
    print(
        "byoa-bench: the benchmark harness is not part of this version yet; "
        "the WAV parser's benchmark runs with: pytest tests/benchmarks --benchmark-enable",
        file=sys.stderr,
    )
    return 2


if __name__ == "__main__":
    sys.exit(main())
