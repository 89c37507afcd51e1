"""``python -m xyro``: the same as the ``xyro`` command (:func:`xyro.cli.main` chooses
numba's cache folder before anything imports ``ranking``)."""

from xyro.cli import main

if __name__ == "__main__":
    main()
