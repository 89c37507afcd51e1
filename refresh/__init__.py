"""Refresh: change-rate estimation and refresh planning. Pure numerics (DESIGN.md §6).

Public API (arrays and plain records in, arrays and plain records out):

* records: :class:`ChangeObservations`, :class:`AccessHistory`
* estimators: :func:`signature_rate` (MLE, eq. 9), :func:`signature_rates` (batch),
  :func:`last_modified_rate` (eq. 10, corrected), :func:`page_reliability`,
  :func:`dated_history`, :func:`host_reliability`, :func:`estimate_rate` (the choice),
  :func:`naive_rate`, :func:`cho_bias_reduced_rate`
* baselines: :func:`baseline_priority` (uniform and change-proportional refresh, to measure
  the planner against)
* planning: :func:`refresh_intervals` (water-filling, Ω), :class:`RateSum` (incremental S),
  :mod:`refresh.bayes` (empirical-Bayes posterior-mean rates on a grid),
  :class:`Folders`, :func:`due_folders`, :func:`folders_after` (the folder formula),
  :func:`due_by_scan`, :func:`compose_unit`, :class:`WaterLedger` (K kept up to date
  between units, :mod:`refresh.waterlevel`)
"""

from refresh.baselines import POLICIES, baseline_priority
from refresh.discovery import UnitFetchList, compose_unit
from refresh.estimators import (RateEstimate, RateSource, cho_bias_reduced_rate, naive_rate,
                                signature_rate, signature_rates)
from refresh.folders import NOT_FILED, Folders, due_by_scan, due_folders, folders_after
from refresh.intervals import (IntervalPlan, RateSum, refresh_intervals, refresh_weights,
                               time_average_obsolescence)
from refresh.last_modified import (Reliability, dated_history, host_reliability,
                                   last_modified_rate, page_reliability, reliable_hosts)
from refresh.observations import AccessHistory, ChangeObservations
from refresh.rate_choice import estimate_rate
from refresh.waterlevel import Family, KeySource, WaterLedger, WaterLevel

__all__ = [
    "AccessHistory", "ChangeObservations", "Family", "Folders", "IntervalPlan", "KeySource",
    "NOT_FILED", "POLICIES", "baseline_priority", "RateEstimate", "RateSource", "RateSum",
    "Reliability", "UnitFetchList", "WaterLedger", "WaterLevel", "cho_bias_reduced_rate",
    "compose_unit", "dated_history", "due_by_scan", "due_folders", "estimate_rate",
    "folders_after", "host_reliability", "last_modified_rate", "naive_rate", "page_reliability",
    "refresh_intervals", "refresh_weights", "reliable_hosts", "signature_rate",
    "signature_rates",
    "time_average_obsolescence",
]
