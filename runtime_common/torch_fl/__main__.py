"""`python -m torch_fl doctor [--json] [--backend NAME] [--script PATH [-- ARGS]]`."""
from __future__ import annotations

import sys

USAGE = "usage: python -m torch_fl doctor [--json] [--backend NAME] [--script PATH [-- ARGS]]"


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE)
        return 0 if argv else 2
    if argv[0] != "doctor":
        print(f"error: unknown command {argv[0]!r}\n{USAGE}", file=sys.stderr)
        return 2
    from .doctor import main as doctor

    return doctor(argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
