"""Periodic work over the metadata store (DESIGN.md §2, §5, §6): the refresh planner
(plan_job.py: each time unit, its writes and fetch list; plan_settings.py: its settings;
plan_estimate.py: λ_i and r_i per page; plan_scan.py: the full scan; plan_ledger.py: the
ledger and the weight keys' water level; plan_unit.py: a unit rebuilt from the full scan or
advanced from the folders; plan_explain.py: what ``xyro plan`` shows) and ranking
(rank_job.py: the rank job over an edge file; rank_run.py: ranking the App's store and
storing importance), and the global PageRank of a scoped warehouse (global_estimate.py:
``xyro rank --global-estimate``; global_stored.py: the local domain as the store holds it;
global_round.py and global_round_state.py: the daemon's rounds and their saved state).

May import: xyro.app, xyro.crawl (the frontier's priority levels) and everything below them
(DESIGN.md §1), metadata, ranking, refresh. Never xyro.service or xyro.cli.
"""
