"""The crawl engine (DESIGN.md §2): the frontier, single owner of queued work with its one
admission (frontier.py; admission.py: scheme, scope, depth, traps, robots.txt) over its
in-memory queues (frontier_queues.py: levels × hosts, robots.txt first), per-host politeness
slots (hosts.py), the seen-set (seenset.py), the crawler loop (crawler.py) and its policies:
retry (retry_policy.py), redirects (redirects.py), the loader's DTD/entity needs
(loader_needs.py), crawl statistics (stats.py), what the crawl tells the operator
(activity.py) and the channel that turns sitemaps and feeds into frontier offers
(publishing.py).

May import: xyro.publication, xyro.loader, xyro.content, xyro.net and the shared leaves
(DESIGN.md §1), metadata. Never xyro.app, xyro.jobs, xyro.service or xyro.cli.
"""
