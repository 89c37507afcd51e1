"""Metadata manager: the SQLite store of URLs, links, observations, versions and state.

Knows nothing of HTTP; imports neither ``ranking`` nor ``refresh`` (DESIGN.md §1).
"""
