"""``python -m xyro``: the same as the ``xyro`` command."""

from xyro.cli import main

main()
