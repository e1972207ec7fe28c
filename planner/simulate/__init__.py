"""Replaying a job trace under scheduling policies: ours and the ones it replaces.

``trace``/``philly``: the trace format, its validated reader and the Philly converter.
``engine``: the event-driven replay (nodes, queues, preemption, run segments).
``policies``: the policy interface and ``priority``, ``fairtree``, ``quota``,
``lookback``; ``planner_policy``: ours, replanning with :func:`planner.run.plan_scenario`;
``slurm_replay``: ours as the exported Slurm script makes Slurm run it (``planner-slurm``).
``metrics``: owed vs delivered, occupancy, budget error, waits, from the segments.
``pictures``: the PNGs; ``run``: simulate several policies and the files to write.
Imports flow one way: this package uses the core; nothing in the core imports it.
"""
