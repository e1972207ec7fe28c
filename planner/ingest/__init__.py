"""The usage ledger: ``planner ingest sacct|kueue FILE`` appends what ran to ``usage.csv``.

Public API (called by ``planner ingest`` and the planning cycle)::

    ingest_usage(scenario_dir, "sacct" | "kueue", path, now=None, dry_run=False)
        -> IngestReport

See :mod:`planner.ingest.run`; parsing (:mod:`~planner.ingest.sacct`,
:mod:`~planner.ingest.kueue`), naming (:mod:`~planner.ingest.names`) and the merge
(:mod:`~planner.ingest.ledger`) are apart.
"""

from planner.ingest.run import SOURCES, IngestReport, Source, ingest_usage, ledger_id

__all__ = ["SOURCES", "IngestReport", "Source", "ingest_usage", "ledger_id"]
