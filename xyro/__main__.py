"""The ``xyro`` command's entry point (and ``python -m xyro``).

It imports the command line itself, so that a Ctrl-C during the imports (numpy, scipy,
lxml: about a second on a cold cache) ends like one during a command: the line
``interrupted`` and exit 130, not a traceback (DESIGN.md §7). :func:`xyro.cli.main` then
chooses numba's cache folder before anything imports ``ranking``.
"""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> None:
    try:
        from xyro.cli import main as cli_main
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        raise SystemExit(130) from None
    cli_main(argv)


if __name__ == "__main__":
    main()
