"""Xyro: an XML warehouse acquisition daemon (after the Xyleme papers).

Layout (DESIGN.md §1), top to bottom; each package imports only those below it
(tests/test_layout.py checks it, and that there is no import cycle):

- ``cli/``          the click commands and their shared context
- ``service/``      the daemon's lifecycle: signals, sd_notify, jobs' scheduling, logs,
                    metrics, the demo, crawl sessions
- ``jobs/``         periodic work over the store: refresh planning, ranking
- ``app.py``        the composition root: every component from one immutable config
- ``crawl/``        the engine: frontier and admission, host slots, seen-set, crawler loop
- ``publication/``  sitemaps, feeds, publication trust (producers for the frontier)
- ``loader/``       the XML loader
- ``content/``      what a body is and holds (pure)
- ``net/``          the network edge: fetcher, connections, bodies, DNS, robots.txt, URLs
- ``config.py``, ``config_load.py``, ``config_yaml.py``, ``clock.py``, ``errors.py``,
  ``records.py``, ``affinity.py``: the shared leaves
- ``synthweb/``     the synthetic web for the demo and tests (imports only the leaves)
"""

__version__ = "0.1.0"
