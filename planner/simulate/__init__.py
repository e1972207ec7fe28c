"""Replaying a job trace under scheduling policies: ours and the ones it replaces.

``trace``/``philly``: the trace format, its validated reader and the Philly converter.
``engine``: the event-driven replay (nodes, queues, preemption, run segments).
``policies``: the policy interface and ``priority``, ``fairtree``, ``quota``,
``lookback``; ``replanner``: ours, replanning with :func:`planner.run.plan_scenario`
and handing each plan to an executor (``executor``: the protocols), which is the ideal
one (``planner_policy``, ``planner``), Slurm as the exported script makes it run
(``slurm_replay``, ``planner-slurm``) or Kueue as the exported objects make it run
(``kueue_replay``, ``planner-kueue``).
``metrics``: owed vs delivered, occupancy, budget error, waits, from the segments.
``pictures``: the PNGs; ``run``: simulate several policies and the files to write.
Imports flow one way: this package uses the core; nothing in the core imports it.
"""
