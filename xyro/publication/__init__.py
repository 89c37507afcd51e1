"""What sites publish about themselves, as producers for the frontier (DESIGN.md §2):
sitemaps (sitemaps.py), RSS/Atom feeds (feeds.py), how far a site's publication dates are
trusted (trust.py) and published dates (published.py).

May import: xyro.loader, xyro.content, xyro.net and the shared leaves (DESIGN.md §1).
Never xyro.crawl or anything above it.
"""
