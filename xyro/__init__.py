"""Xyro: an XML warehouse acquisition daemon (after the Xyleme papers)."""

__version__ = "0.1.0"
