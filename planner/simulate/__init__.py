"""Replaying a job trace under scheduling policies: ours and the ones it replaces.

``trace``/``philly``: the trace format, its validated reader and the Philly converter.
The simulator, the policies and the metrics sit beside them.
"""
