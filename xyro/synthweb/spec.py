"""What a synthetic web looks like: the frozen, seed-determined recipe (:class:`WebSpec`).

Units: change rates are events per second of the injected clock's time line; delays and
windows named ``*_seconds`` / ``crawl_delays`` / ``throttle_retry_after`` are clock seconds;
``drip_interval`` and ``idle_timeout`` are real seconds (they exist to defeat or bound socket
timeouts, which are real-time by DESIGN.md §3).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

# Every hostile case the web knows; each is described (with its expected outcome) in hostile.py.
HOSTILE_KINDS: frozenset[str] = frozenset({
    "gzip_bomb", "big_body", "slow_drip", "redirect_loop", "redirect_chain", "redirect_short",
    "calendar_trap", "malformed_html", "bad_utf8", "bogus_charset", "gone", "busy_503",
    "throttled_host", "xml_as_text", "html_as_xml", "silent_host", "refused_port",
    "robots_500", "robots_malformed",
})


@dataclass(frozen=True)
class RobotsRule:
    """Explicit robots.txt rules for one host (index into the web's hosts)."""

    host: int
    disallow: tuple[str, ...] = ()
    crawl_delay: float | None = None


@dataclass(frozen=True)
class WebSpec:
    """The recipe of a synthetic web; the same spec always builds the same web."""

    seed: int = 7
    n_hosts: int = 8
    n_pages: int = 400
    xml_share: float = 0.3
    # In-degree tail exponent gamma: P(in-degree = k) ~ k^-gamma (web graphs: about 2.1).
    inlink_exponent: float = 2.1
    mean_out_degree: float = 8.0
    cross_host_share: float = 0.15
    # Per-page change rate lambda ~ Gamma(shape, mean/shape); ``static_share`` never change.
    change_rate_mean: float = 1.0 / 86400.0
    change_rate_shape: float = 0.7
    static_share: float = 0.2
    reliable_lm_share: float = 0.5
    etag_share: float = 1.0
    sitemap_share: float = 0.5
    # Of the hosts with a sitemap, the share whose <lastmod> dates are the true last changes;
    # the others stamp every URL with the time the sitemap was generated (a lying CMS).
    sitemap_honest_share: float = 0.5
    disallow_share: float = 0.5
    disallowed_page_share: float = 0.1
    crawl_delay_share: float = 0.25
    crawl_delays: tuple[float, ...] = (0.5, 1.0, 2.0)
    robots_missing_share: float = 0.2
    robots_rules: tuple[RobotsRule, ...] = ()
    hostile: frozenset[str] = field(default_factory=lambda: HOSTILE_KINDS)
    drip_interval: float = 0.5
    drip_bytes: int = 200
    big_body_bytes: int = 50 * 2**20
    bomb_bytes: int = 2**30
    redirect_chain_length: int = 8
    throttle_retry_after: float = 2.0
    busy_seconds: float = 600.0
    gone_after_seconds: float = 86400.0
    robots_error_seconds: float = 3600.0
    first_address: int = 2
    idle_timeout: float = 15.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "hostile", frozenset(self.hostile))
        for name in ("xml_share", "cross_host_share", "static_share", "reliable_lm_share",
                     "etag_share", "sitemap_share", "sitemap_honest_share", "disallow_share", "disallowed_page_share",
                     "crawl_delay_share", "robots_missing_share"):
            _check(0.0 <= getattr(self, name) <= 1.0, name, "must be in [0, 1]", self)
        _check(self.n_hosts >= 1, "n_hosts", "must be >= 1", self)
        _check(self.n_pages >= self.n_hosts, "n_pages", "must be >= n_hosts (one home "
               "page per host)", self)
        _check(self.inlink_exponent > 1.0, "inlink_exponent", "must be > 1", self)
        _check(self.mean_out_degree >= 1.0, "mean_out_degree", "must be >= 1", self)
        _check(self.change_rate_mean >= 0 and math.isfinite(self.change_rate_mean),
               "change_rate_mean", "must be finite and >= 0", self)
        _check(self.change_rate_shape > 0, "change_rate_shape", "must be > 0", self)
        _check(all(d > 0 for d in self.crawl_delays) and bool(self.crawl_delays),
               "crawl_delays", "must be a non-empty tuple of positive seconds", self)
        unknown = self.hostile - HOSTILE_KINDS
        _check(not unknown, "hostile", f"has unknown kinds {sorted(unknown)}; known: "
               f"{sorted(HOSTILE_KINDS)}", self)
        _check(self.drip_interval > 0 and self.drip_bytes > 0, "drip_interval",
               "and drip_bytes must be > 0", self)
        _check(self.redirect_chain_length >= 1, "redirect_chain_length", "must be >= 1", self)
        _check(2 <= self.first_address and self.first_address + self.n_hosts + 2 <= 255,
               "first_address", "plus n_hosts + 2 must fit in 127.0.0.2-254", self)
        for rule in self.robots_rules:
            _check(0 <= rule.host < self.n_hosts, "robots_rules",
                   f"names host {rule.host}, outside 0..{self.n_hosts - 1}", self)
            _check(all(p.startswith("/") for p in rule.disallow), "robots_rules",
                   f"host {rule.host}: disallow prefixes must start with '/'", self)

    @property
    def host_roles_needed(self) -> int:
        """How many hosts the host-level hostile cases take (host 0 always stays plain)."""
        return len(self.hostile & {"robots_500", "robots_malformed", "throttled_host"})


def _check(ok: bool, name: str, what: str, spec: object) -> None:
    if not ok:
        raise ValueError(f"WebSpec.{name} {what} (got {getattr(spec, name, '?')!r}); "
                         f"fix the spec")
