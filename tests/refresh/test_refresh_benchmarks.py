"""The refresh benchmarks still run (``--quick``) and print one JSON line with their keys."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench"


def run_quick(name: str, *extra: str) -> dict:
    proc = subprocess.run([sys.executable, str(BENCH / name), "--quick", *extra],
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.strip().splitlines()
    assert len(lines) == 1, f"expected one JSON line, got {len(lines)}"
    out = json.loads(lines[0])
    assert {"cpu", "cores", "ram_gib", "python"} <= set(out["machine"])
    return out


def test_change_rates_quick() -> None:
    out = run_quick("change_rates.py", "--pages", "40")
    assert set(out["systems"]) == {"mle", "mle_bias_reduced", "naive", "cho_bias_reduced",
                                   "last_modified", "last_modified_paper_eq10"}
    assert {"max_abs_bias_50_reads", "worst_median_abs_rel_error_20_reads"} <= set(out["systems"]["mle"])
    assert len(out["cells"]) == 2 * 2 * 7
    for name in ("plain_mle", "bias_reduced_mle"):
        assert isinstance(out["target"][name]["met"], bool)
        assert isinstance(out["target"][name]["met_within_2_stderr"], bool)
    assert all(c["estimators"]["mle"]["bias_stderr"] >= 0 for c in out["cells"])


def test_refresh_sim_quick() -> None:
    out = run_quick("refresh_sim.py", "--pages", "2000", "--units", "15")
    assert set(out["systems"]) == {"xyleme", "xyleme_eb", "xyleme_eb_probe",
                                   "xyleme_true_prior", "xyleme_known_fast", "xyleme_mle_lm",
                                   "xyleme_mle_lm_shrunk", "xyleme_eb_lm", "oracle", "round_robin",
                                   "change_proportional", "change_proportional_eb",
                                   "change_proportional_lm", "change_proportional_true_rates",
                                   "nutch_adaptive"}
    for s in out["systems"].values():
        assert {"obsolescence", "ratio_to_clamped_optimum", "ratio_to_omega_G",
                "freshness_plain", "freshness_importance_weighted"} <= set(s)
        assert 0.0 <= s["freshness_plain"] <= 1.0
    analytic = out["analytic_true_rates"]
    assert analytic["clamped_optimum"] >= analytic["omega_G"]
    # The optimum beats the baselines' own best (their intervals with the true rates).
    assert analytic["change_proportional_steady_state_ratio_to_clamped_optimum"] > 1.0
    assert analytic["round_robin_steady_state_ratio_to_clamped_optimum"] > 1.0
    assert out["folders_match_full_scan"] is True
    assert out["incremental_s_rel_error"] < 1e-9


def test_refresh_sim_rejects_a_share_outside_0_1() -> None:
    proc = subprocess.run([sys.executable, str(BENCH / "refresh_sim.py"), "--quick",
                           "--lm-share", "1.5"], capture_output=True, text=True, timeout=60,
                          check=False)
    assert proc.returncode == 2
    assert "--lm-share 1.5 must be between 0 and 1" in proc.stderr


def test_refresh_sim_all_sites_last_modified() -> None:
    out = run_quick("refresh_sim.py", "--pages", "2000", "--units", "15", "--lm-share", "1")
    assert out["config"]["lm_share_of_pages"] == 1.0
    assert isinstance(out["targets_last_modified_variant"]["within_10pct_of_clamped_optimum"],
                      bool)


@pytest.mark.slow
def test_folder_scaling_quick() -> None:
    out = run_quick("folder_scaling.py", "--units", "5")
    assert out["targets"]["folders_match_full_scan"] is True
    assert out["ratio_big_to_small_seconds_per_unit"] > 0
