"""The words every output shares: one definition each, one risk vocabulary, one rounding.

``planner status``, ``planner explain``, ``summary.txt``, the workbook, the HTML report and
the dashboard (``planner serve``) all take their terms from here, so a figure or a flag
reads the same wherever a person meets it (docs/explanation/words.md says the same in
prose):

- **NGH** (:data:`NGH_DEFINITION`): normalized GPU-hours, GPU-hours × the GPU type's rate;
  every page or table that shows NGH defines it (:func:`ngh_definition` names the rates);
- **risks** (:data:`RISKS`): a project's flags, from :func:`risk_flags` alone, and the
  legend every output prints beside them (:func:`legend_lines`);
- **rounding** (:func:`number`, :func:`percent`): half away from zero on the value read to
  15 significant digits, as a spreadsheet displays ``#,##0`` and ``0.0%``, so the terminal,
  the HTML and the workbook print the same digits for the same value;
- **the verdict** (:func:`verdict`): the one sentence the reports and the dashboard open
  with;
- **the water level** (:func:`water_level_words`): λ said in words.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal

NGH_DEFINITION = ("NGH (normalized GPU-hours) = GPU-hours × the GPU type's rate, so an hour "
                  "on a slower GPU costs less of a budget")

OVERDRAWN_WORDS = ("overdrawn: what it ran (used, plus any work charged to no budget) is a "
                   "whole budget ahead of the even pace (twice the budget at the quarter's "
                   "end); its work beyond the budget runs only on GPUs no other project's "
                   "work waits for, and is preempted as soon as some does (Kueue: the pool "
                   "Cohort at weight 0; Slurm: QOS gp-overdrawn, past what keeps it at its "
                   "pace; executor contract rule 8)")

OVER = 1.0  # forecast above this share of the budget: overrun
UNDER = 0.8  # forecast below this share of the budget: budget left unused
OPPORTUNISTIC_HEAVY = 0.25  # opportunistic NGH planned beyond this share of the budget

OVERRUN = "overrun"
UNUSED = "unused budget"
OPPORTUNISTIC = "opportunistic-heavy"
UNPLACED = "unplaced"


@dataclass(frozen=True)
class RiskTerm:
    """One flag of the risk vocabulary and what it means, in a sentence."""

    name: str
    meaning: str


RISKS = (
    RiskTerm(OVERRUN, f"forecast (used + planned) above {100 * OVER:.0f} % of the budget"),
    RiskTerm(UNUSED, f"forecast below {100 * UNDER:.0f} % of the budget: the rest of it "
                     "will go unused this quarter"),
    RiskTerm(OPPORTUNISTIC, f"the plan gives it more than {100 * OPPORTUNISTIC_HEAVY:.0f} % "
                            "of its budget again as opportunistic GPU-hours (beyond budget, "
                            "preemptible, only where nobody within budget wants the GPUs): "
                            "work it counts on may be preempted"),
    RiskTerm(UNPLACED, "a whole-node reservation request the plan could not place"),
)
MEANING = {r.name: r.meaning for r in RISKS}
PROJECT_RISKS = (OVERRUN, UNUSED, OPPORTUNISTIC)  # the flags risk_flags may give


def risk_flags(budget: float, forecast: float, opportunistic: float) -> tuple[str, ...]:
    """A project's flags, in :data:`PROJECT_RISKS` order (NGH for the quarter).

    ``forecast`` = used + planned; ``opportunistic`` = NGH planned beyond the budget.
    A project without a budget is ``overrun`` as soon as it is forecast to spend anything.
    """
    flags = []
    if budget <= 0:
        return (OVERRUN,) if forecast > 1e-6 else ()
    if forecast > OVER * budget + 1e-6:
        flags.append(OVERRUN)
    if forecast < UNDER * budget:
        flags.append(UNUSED)
    if opportunistic > OPPORTUNISTIC_HEAVY * budget + 1e-6:
        flags.append(OPPORTUNISTIC)
    return tuple(flags)


def legend_lines(names: Iterable[str] = tuple(r.name for r in RISKS)) -> list[str]:
    """``flag: meaning`` lines for ``names`` (default: every flag)."""
    return [f"{name}: {MEANING[name]}" for name in names]


def ngh_definition(rates: Mapping[str, float] | None = None) -> str:
    """:data:`NGH_DEFINITION`, with the rates when given (``H100 1, A100 0.55``)."""
    if not rates:
        return NGH_DEFINITION
    listed = ", ".join(f"{gpu} {rate:g}" for gpu, rate in rates.items())
    return f"{NGH_DEFINITION} ({listed})"


def plan_rates(plan: Mapping) -> dict[str, float]:
    """The GPU types' rates of a plan's clusters, in cluster order."""
    rates: dict[str, float] = {}
    for c in plan["clusters"]:
        rates.setdefault(c["gpu_type"], float(c["rate"]))
    return rates


# --------------------------------------------------------------------------- rounding


def rounded(value: float, decimals: int = 0) -> Decimal:
    """``value`` rounded as a spreadsheet displays it.

    Read to 15 significant digits, then half away from zero (2.5 → 3, −2.5 → −3,
    2.675 → 2.68 at two decimals).
    """
    exact = Decimal(f"{float(value):.15g}")
    out = exact.quantize(Decimal(1).scaleb(-decimals), rounding=ROUND_HALF_UP)
    return out if out != 0 else abs(out)  # no "-0"


def number(value: float, decimals: int = 0) -> str:
    """``1,234`` (``decimals`` places, thousands separated), rounded by :func:`rounded`."""
    return f"{rounded(value, decimals):,.{decimals}f}"


def percent(share: float, decimals: int = 1) -> str:
    """``93.4 %`` for a share 0.934 (rounded by :func:`rounded` on the share × 100)."""
    exact = Decimal(f"{float(share):.15g}") * 100
    return f"{number(float(exact), decimals)} %"


# --------------------------------------------------------------------------- sentences


def unbudgeted_words(ngh: float, decimals: int = 0) -> str:
    """`` and 4,224 NGH run on no budget``, said beside a project's ``used``; ``""`` for none.

    ``ngh``: what the project ran charged to no budget in the quarter up to ``as_of``
    (Slurm's ``gp-opportunistic`` and ``gp-overdrawn`` jobs, the scenario's
    ``unbudgeted.csv``: :func:`planner.contract.unbudgeted_ngh`), which its ``used`` does
    not count and the executor contract's rule 8 does.
    """
    if ngh <= 0:
        return ""
    return f" and {number(ngh, decimals)} NGH run on no budget"


def verdict(quarter: str, as_of: str, budget: float, forecast: float,
            flags: Mapping[str, int], projects: int, unplaced: int) -> str:
    """The one-sentence verdict of a quarter, as of a date.

    ``flags``: how many projects carry each flag (:func:`risk_flags`); ``projects``: how
    many there are; ``unplaced``: reservation requests the plan could not place.
    """
    share = f"{percent(forecast / budget)} of" if budget else "beyond"
    counts = ", ".join(f"{flags.get(name, 0)} {name}" for name in PROJECT_RISKS)
    places = f"{unplaced} reservation{'' if unplaced == 1 else 's'} {UNPLACED}"
    return (f"{quarter} as of {as_of[:10]}: the institute is forecast to spend "
            f"{number(forecast)} NGH, {share} its {number(budget)} NGH budget; of its "
            f"{projects} projects {counts}; {places}.")


def water_level_words(lam: float) -> str:
    """λ in words: what the water level of a sibling group means."""
    return (f"water level {number(lam, 1)} NGH per unit of weight: each sibling gets its "
            "weight × this level, less its recent (lookback) usage, but never more than it "
            "asks")
