"""The one way times are written: UTC, ``YYYY-MM-DDTHH:MM:SSZ``."""

from __future__ import annotations

import pandas as pd


def iso(stamp: pd.Timestamp) -> str:
    """``2026-11-02T00:00:00Z``."""
    return stamp.tz_convert("UTC").strftime("%Y-%m-%dT%H:%M:%SZ")
