"""What ``xyro plan`` shows of the refresh plan (DESIGN.md §6): the summary of a full scan
(:func:`summary`) and, for one page, r, λ and its evidence, t and the folder
(:func:`explain`, ``xyro plan --explain``)."""

from __future__ import annotations

import math
import sqlite3
from collections.abc import Callable
from typing import Any

import numpy as np

from metadata import refresh_queries as q
from xyro.errors import XyroError
from xyro.jobs.plan_estimate import PageEstimator
from xyro.jobs.plan_scan import Plan
from xyro.jobs.plan_settings import PlannerSettings


def explain(conn: sqlite3.Connection, est: PageEstimator, s: PlannerSettings, url: str,
            plan_of: Callable[[], Plan]) -> dict[str, Any]:
    """r, λ and its evidence, t and the folder of one page; ``plan_of`` gives the full scan
    (called once the page is known to be in the database)."""
    row = q.url_row(conn, url)
    if row is None:
        raise XyroError(f"{url} is not in the database; give the canonical URL as "
                        "`xyro status`/the v_change_rates view show it")
    plan = plan_of()
    out: dict[str, Any] = {"url": url, "type": row["type"], "host": row["host"],
                           "accesses": row["accesses"], "changes": row["changes"]}
    pos = int(plan.index(np.array([row["id"]]))[0])
    if pos < 0:
        out["planned"] = False
        out["why_not"] = (f"type {row['type']!r} with {row['accesses']} accesses: only "
                          "fetched HTML and XML pages are refreshed")
        return out
    top = plan.watermark
    history = est.history(q.observations_of(conn, [row["id"]], top).get(row["id"], []))
    ev = plan.evidence.get(row["id"]) or est.estimate(
        {row["id"]: history}, {row["id"]: row["host_id"]}, plan.prior)[row["id"]]
    unit_s = s.time_unit_s
    t = float(plan.intervals[pos])
    column = "importance" if row["type"] == "xml" or s.importance_source == "importance" \
        else "interest"
    source = "uniform" if s.importance_source == "uniform" else \
        {"importance": "importance (direct rank)", "interest": "interest (inverse rank)"}[column]
    missing = row[column] is None
    out.update({
        "planned": True,
        "r": float(plan.importance[pos]),
        "r_source": source + (" missing: 1" if missing and source != "uniform" else ""),
        "rate_per_unit": float(plan.rates[pos]),
        "rate_per_day": float(plan.rates[pos]) / unit_s * 86400.0,
        "rate_source": plan.sources[pos],
        "rate_stderr_per_unit": ev.estimate.stderr,
        "observations": ev.accesses, "observed_changes": ev.changes,
        "last_modified_reliable": ev.lm_reliable, "last_modified_reason": ev.lm_reason,
        "interval_units": t if math.isfinite(t) else None,
        "interval_s": t * unit_s if math.isfinite(t) else None,
        "due_unit": None if plan.due[pos] == q.NO_UNIT else int(plan.due[pos]),
        "current_unit": plan.unit, "k": finite(plan.k),
    })
    if not math.isfinite(t):
        out["why_not"] = _never_refreshed(s, float(plan.importance[pos]))
    return out


def _never_refreshed(s: PlannerSettings, r: float) -> str:
    """Why a planned page gets no interval: its r, or no refresh bandwidth at all."""
    if r > 0 and r >= s.importance_floor and s.refresh_bandwidth <= 0:
        return (f"the refresh bandwidth G − round(ρ·G) is 0 pages/unit (G = {s.bandwidth}, "
                f"ρ = {s.discovery_share:g}) while pages are unread: never refreshed; raise "
                "refresh.bandwidth_pages_per_unit or lower refresh.discovery_share")
    return (f"r = {r:.4g} is below the importance floor {s.importance_floor} (or 0): "
            "never refreshed")


def summary(plan: Plan, units_ahead: int = 10) -> dict[str, Any]:
    """What ``xyro plan`` prints: due per unit, Ω, quantiles of t and λ, sources."""
    finite_t = np.isfinite(plan.intervals)
    qs = (0.0, 0.1, 0.5, 0.9, 1.0)

    def quant(values: np.ndarray) -> dict[str, float] | None:
        if values.size == 0:
            return None
        return {f"p{int(p * 100)}": round(float(np.quantile(values, p)), 6) for p in qs}

    sources: dict[str, int] = {}
    for src in plan.sources:
        sources[src] = sources.get(src, 0) + 1
    return {
        "current_unit": plan.unit, "planned_pages": int(plan.ids.size),
        "never_refreshed": int((~finite_t).sum()),
        "refresh_bandwidth_pages_per_unit": round(plan.bandwidth, 3),
        "k": finite(plan.k), "omega_G_unclamped": round(plan.omega_unclamped, 6),
        "omega_plan": round(plan.omega, 6), "t_max_used_units": plan.t_max_used,
        "prior_rate_per_unit": round(plan.prior, 6),
        "estimated_this_pass": plan.n_estimated,
        "due_per_unit": {str(k): v for k, v in
                         plan.due_counts(plan.unit, plan.unit + units_ahead - 1).items()},
        "interval_units_quantiles": quant(plan.intervals[finite_t]),
        "rate_per_unit_quantiles": quant(plan.rates),
        "rate_sources": sources,
    }


def finite(x: float) -> float | None:
    """``x``, or None (JSON null) when it is not finite."""
    return float(x) if math.isfinite(x) else None
