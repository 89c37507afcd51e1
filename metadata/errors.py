"""The one exception type the metadata manager raises for a store it cannot use."""

from __future__ import annotations


class MetadataError(Exception):
    """The metadata store cannot be opened, migrated or written (message says what to do)."""
