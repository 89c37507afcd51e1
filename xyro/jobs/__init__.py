"""Periodic work over the metadata store (DESIGN.md §2, §5, §6): the refresh planner
(plan_job.py: change rates, K, t_i, folders, each time unit) and ranking (rank_job.py: the
rank job over an edge file; rank_run.py: ranking the App's store and storing importance).

May import: xyro.app, xyro.crawl (the frontier's priority levels) and everything below them
(DESIGN.md §1), metadata, ranking, refresh. Never xyro.service or xyro.cli.
"""
