"""``python -m bench <scenario> [flags]``: run one benchmark; without one, list them."""

from __future__ import annotations

import sys

from bench.harness import SCENARIOS, main

if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in SCENARIOS:
        print(f"usage: python -m bench <scenario> [flags]; scenarios: {', '.join(SCENARIOS)}")
        raise SystemExit(0 if sys.argv[1:2] in ([], ["-h"], ["--help"]) else 2)
    raise SystemExit(main(sys.argv[1], sys.argv[2:]))
