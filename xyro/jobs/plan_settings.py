"""The refresh planner's settings: the ``refresh`` configuration section in the planner's
units (DESIGN.md §6): pages per unit, the discovery share ρ, interval bounds in units."""

from __future__ import annotations

from dataclasses import dataclass

from refresh.discovery import discovery_slots
from xyro.config import RefreshConfig


@dataclass(frozen=True)
class PlannerSettings:
    """The refresh section of the configuration, in the planner's units."""

    time_unit_s: float
    bandwidth: int
    discovery_share: float
    min_interval_units: float
    max_interval_units: float
    importance_floor: float
    importance_source: str = "rank"
    policy: str = "planner"  # or a baseline of refresh.baselines, for measurements

    @classmethod
    def from_config(cls, cfg: RefreshConfig) -> PlannerSettings:
        return cls(cfg.time_unit_s, cfg.bandwidth_pages_per_unit, cfg.discovery_share,
                   float(cfg.min_interval_units), float(cfg.max_interval_units),
                   cfg.importance_floor, cfg.importance_source, cfg.policy)

    @property
    def refresh_bandwidth(self) -> float:
        """G − round(ρ·G): pages per unit planned for refreshing known pages, the slots a
        unit leaves them while pages are unread (``refresh.discovery_slots``). Planned for
        (1 − ρ)·G when that is not whole, the folders would get more pages a unit than it
        has slots, and the lowest-weight pages would be deferred for ever."""
        return float(self.bandwidth - discovery_slots(self.bandwidth, self.discovery_share))

    def t_max_for(self, kept: int) -> float:
        """t_max, stretched when the pages kept cannot all be visited every t_max within the
        refresh bandwidth (rather than failing)."""
        g = self.refresh_bandwidth
        return max(self.max_interval_units, kept / g * (1 + 1e-9)) if g > 0 else \
            self.max_interval_units
