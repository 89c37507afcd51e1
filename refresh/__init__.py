"""Refresh: change-rate estimation and refresh planning. Pure numerics (DESIGN.md §6)."""
