"""``planner sweep``: a grid of plans or replays run as Ray tasks, resumable, in one table.

:mod:`~planner.sweep.spec` reads ``SPEC.toml``; :mod:`~planner.sweep.cells` makes and
runs one cell; :mod:`~planner.sweep.run` runs them (Ray or one by one), resumes and
writes ``sweep.csv``; :mod:`~planner.sweep.html` writes ``sweep.html``.
"""
