"""`python -m torch_fl doctor|coverage ...`: the runtime's commands (torchfl-gen runs them too,
in a process of their own, since the generator imports no part of the runtime)."""
from __future__ import annotations

import sys

USAGE = ("usage: python -m torch_fl doctor [--json] [--backend NAME] [--script PATH [-- ARGS]]\n"
         "       python -m torch_fl coverage --chip NAME --script PATH [--json] [-- ARGS]")


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE)
        return 0 if argv else 2
    if argv[0] == "doctor":
        from .doctor import main as doctor

        return doctor(argv[1:])
    if argv[0] == "coverage":
        from .coverage import main as coverage

        return coverage(argv[1:])
    print(f"error: unknown command {argv[0]!r}\n{USAGE}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
