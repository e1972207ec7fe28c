"""A stateful stand-in for ``sacctmgr`` and ``scontrol``, for the apply-script tests.

It understands exactly the commands the Slurm exporter emits and fails the way Slurm does
where it matters for idempotence: adding an account, QOS or reservation that exists is an
error, as is modifying, updating or deleting one that does not. State is a JSON file
(``FAKE_SLURM_STATE``); every call is appended to ``FAKE_SLURM_LOG``.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path


def _pairs(words: list[str]) -> dict[str, str]:
    return dict(w.split("=", 1) for w in words if "=" in w)


def _sacctmgr(state: dict, args: list[str]) -> int:
    args = [a for a in args if a not in ("-i", "-n")]
    verb, kind, name, rest = args[0], args[1], args[2], args[3:]
    table = state.setdefault(kind, {})
    if verb == "show":
        if name in table:
            print(f"{name}|{json.dumps(table[name], sort_keys=True)}")
        return 0
    if verb == "add":
        if name in table:
            print(f" Nothing new added. {kind} {name} exists", file=sys.stderr)
            return 1
        table[name] = {k.lower(): v for k, v in _pairs(rest).items()}
        return 0
    if verb == "modify":
        if name not in table or rest[0] != "set":
            return 1
        for key, value in _pairs(rest[1:]).items():
            if key.endswith("+"):
                have = set(filter(None, table[name].get(key[:-1].lower(), "").split(",")))
                table[name][key[:-1].lower()] = ",".join(sorted(have | {value}))
            else:
                table[name][key.lower()] = value
        return 0
    return 2


def _scontrol(state: dict, args: list[str]) -> int:
    args = [a for a in args if a != "-o"]
    table = state.setdefault("reservation", {})
    if args[:2] == ["show", "reservation"]:
        name = args[2]
        if name not in table:
            print(f"Reservation {name} not found", file=sys.stderr)
            return 1
        fields = " ".join(f"{k}={v}" for k, v in sorted(table[name].items()))
        print(f"ReservationName={name} {fields}")
        return 0
    if args[:2] == ["create", "reservation"]:
        fields = _pairs(args[2:])
        name = fields.pop("ReservationName")
        if name in table:
            return 1
        table[name] = fields
        return 0
    fields = _pairs(args[1:])
    name = fields.pop("ReservationName")
    if name not in table:
        return 1
    if args[0] == "update":
        if "EndTime" in fields and "Duration" not in fields:
            table[name].pop("Duration", None)
        table[name].update(fields)
        return 0
    if args[0] == "delete":
        del table[name]
        return 0
    return 2


def main() -> int:
    """Dispatch on the command name given as the first argument."""
    state_file = Path(os.environ["FAKE_SLURM_STATE"])
    state = json.loads(state_file.read_text()) if state_file.exists() else {}
    with open(os.environ["FAKE_SLURM_LOG"], "a", encoding="utf-8") as log:
        log.write(" ".join(sys.argv[1:]) + "\n")
    tool, args = sys.argv[1], sys.argv[2:]
    code = (_sacctmgr if tool == "sacctmgr" else _scontrol)(state, args)
    state_file.write_text(json.dumps(state, indent=1, sort_keys=True))
    return code


if __name__ == "__main__":
    sys.exit(main())
