"""A synthetic web on loopback for crawler tests, benchmarks and ``xyro demo``.

Public API: :class:`WebSpec` (the recipe), :class:`SyntheticWeb` (servers + ground truth),
:class:`RequestLog` / :class:`RequestRecord` (what was served), :data:`CASES` (hostile
cases with their expected outcomes).
"""

from xyro.synthweb.hostile import CASES, HostileCase
from xyro.synthweb.log import RequestLog, RequestRecord
from xyro.synthweb.model import Host, Link, Page, WebModel, build_model
from xyro.synthweb.spec import HOSTILE_KINDS, RobotsRule, WebSpec
from xyro.synthweb.web import SyntheticWeb

__all__ = ["CASES", "HOSTILE_KINDS", "Host", "HostileCase", "Link", "Page", "RequestLog",
           "RequestRecord", "RobotsRule", "SyntheticWeb", "WebModel", "WebSpec", "build_model"]
