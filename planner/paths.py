"""Where the checkout's bundled data sit (light: the CLI reads these before any import).

A wheel installed outside the checkout has no ``data/`` folder: there every scenario must
be given (the CLI says so, exit 2); the planning models and report templates are package
data and travel with the wheel.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent  # the checkout (or site-packages' parent)
#: The bundled sample scenario, the default SCENARIO in a checkout.
SAMPLE = ROOT / "data" / "sample"
#: The bundled scenario the Philly trace is replayed on.
PHILLY_SCENARIO = ROOT / "data" / "philly"
#: Where the shared Philly extract sits beside the project (it is not shipped with it).
PHILLY_CSV = ROOT.parent / "shared" / "data" / "traces" / "philly-vc" / "philly.csv"
