"""The network edge (DESIGN.md §2, §7, §8): the fetcher (fetcher.py) over pinned connections
(connections.py), capped and decoded bodies (body.py), DNS with address refusal (dns.py),
robots.txt (robots.py), URLs, scope and trap rules (urls.py), and what the fetcher refuses
before reading a body: URL suffixes and Content-Types (filters.py).

May import: only the shared leaves (xyro.config, config_load, config_yaml, clock, errors,
records, affinity; DESIGN.md §1). It knows nothing of what a body means (xyro.content sits above it).
"""
