"""The daemon's lifecycle (DESIGN.md §1, §6, §7): ``xyro run`` (daemon.py) with its signals,
sd_notify, scheduler wiring of the jobs, logs and Prometheus metrics; ``xyro demo`` (demo.py)
on the synthetic web; and crawl sessions (crawl_run.py), which build a crawl from the App.

May import: xyro.jobs, xyro.app, xyro.crawl and everything below them (DESIGN.md §1),
xyro.synthweb (the demo), metadata/ranking/refresh. Never xyro.cli.
"""
