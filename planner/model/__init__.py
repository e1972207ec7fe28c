"""The planning model: problem arrays, reservation placement (HiGHS MIP), elastic LP (HiGHS)."""
