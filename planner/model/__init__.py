"""The planning model: problem arrays, reservation placement (CP-SAT), elastic LP (HiGHS)."""
