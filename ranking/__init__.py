"""Ranking: direct importance, inverse interest, out-of-core slicing. Pure numerics (DESIGN.md §5)."""
