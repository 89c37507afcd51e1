"""What a fetched body is and holds (DESIGN.md §2): classification by MIME, suffix and
sniffing (classify.py), HTML link extraction (html_links.py), signatures (signature.py) and
the analysis of one fetched page (page.py). Pure: no I/O, no threads.

May import: xyro.net (URL canonicalization, the fetch-time filters) and the shared leaves
(DESIGN.md §1). The network edge never imports this package: the fetcher hands bodies *up*
to it (the crawler calls ``page.analyse`` on the fetcher's result).
"""
