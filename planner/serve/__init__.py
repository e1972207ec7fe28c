"""``planner serve``: a read-only web dashboard and Prometheus metrics over a cycle's state.

- :mod:`planner.serve.state`: what the state folder holds (the kept cycles, ``current``,
  the run log), read only, by names taken from its own listing;
- :mod:`planner.serve.views`: one cycle's figures, computed once with the library's own
  functions (:mod:`planner.status`, :mod:`planner.explain`, :mod:`planner.reports.content`);
- :mod:`planner.serve.svg`: the charts, as inline SVG;
- :mod:`planner.serve.metrics`: the ``/metrics`` text (``prometheus_client``);
- :mod:`planner.serve.app`: the Starlette app (server-rendered pages, ``/api``, ``/healthz``);
- :mod:`planner.serve.deploy`: the Grafana dashboard and Prometheus alert rules in ``deploy/``.
"""
