"""Settings every test directory shares.

Hypothesis draws the same examples on every run (``derandomize``): the default run is what
CI runs, and a test that fails there must fail the same way on the next run, not at random
(an example a fuzz test found once is kept as an ``@example``). To explore new examples run
``pytest --hypothesis-profile explore``.
"""

from hypothesis import settings

settings.register_profile("repeatable", derandomize=True)
settings.register_profile("explore", derandomize=False)
settings.load_profile("repeatable")
