"""The paper's published reference values (Xing et al., *AffectSim*, Tables 3-6; ``docs/protocol.md`` §8),
kept as the strings it prints so that a report quotes them at their own precision (11.70, not 11.7). Percentages, except
``mean_path_m`` (metres per episode). :func:`value` gives a number for comparisons.
"""

from __future__ import annotations

from affectsim_core.protocol import EMOTIONS

#: Table 3 group means: Macro-F1 (%) per setting, Δgain (pp) and the OGR of the group means (%).
TABLE3 = {"open-source mean (19)": {"p_init": "9.89", "p_ref": "15.56", "p_mon": "10.31", "a_obs": "11.70",
                                    "gain": "+1.81", "ogr": "32.0"},
          "closed-source mean (5)": {"p_init": "22.61", "p_ref": "30.78", "p_mon": "24.44", "a_obs": "24.26",
                                     "gain": "+1.64", "ogr": "20.1"}}
#: Table 4 group means: (complete test set, new-observation subset) x (episodes, P-Init, A-Obs, gain).
TABLE4 = {"open-source mean (19)": {"all": ("3,941", "9.89", "11.70", "+1.81"), "new": ("1,881", "10.95", "14.35", "+3.40")},
          "closed-source mean (5)": {"all": ("3,941", "22.61", "24.26", "+1.64"), "new": ("1,881", "25.38", "28.29", "+2.91")}}
#: Table 5 group means: Recovery Rate, E-SPL@1, @3, @5 (%).
TABLE5 = {"open-source mean (19)": ("3.10", "1.35", "0.73", "0.66"),
          "closed-source mean (5)": ("7.24", "3.03", "1.77", "1.23")}
#: Table 6: the baseline's acquisition diagnostics on the complete test split.
TABLE6 = {"handoff_pct": "47.73", "mean_path_m": "23.23", "path_before_handoff_pct": "97.4",
          "budget_exhausted_pct": "52.27", "clipped_pct": "14.10"}

K = len(EMOTIONS)
#: Chance floors of Macro-F1 (%) with balanced classes: always predicting one class (F1 2/(K+1) for
#: that class, 0 for the others) and guessing uniformly at random (F1 1/K for every class).
CHANCE = {"single class": f"{100 * 2 / (K * (K + 1)):.2f}", "uniform": f"{100 / K:.2f}"}


def value(text: str) -> float:
    """A published value as a number ("+1.81" -> 1.81, "3,941" -> 3941.0)."""
    return float(text.replace(",", ""))
