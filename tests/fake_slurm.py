"""A stateful stand-in for ``sacctmgr`` and ``scontrol``, for the apply-script tests.

It understands exactly the commands the Slurm exporter emits and fails the way Slurm
(22.05, checked against the real one in ``test_real_slurm_*``) does where it matters for
idempotence: adding an account, QOS or reservation that exists is an error, as is
modifying, updating or deleting one that does not, and a ``sacctmgr modify`` that changes
nothing (" Nothing modified", exit 1). The real one exits 1 so for ``modify account ... set
parent=``; for ``modify qos`` it says "Modified qos" and exits 0 even when nothing changed,
so the fake is stricter there on purpose: an unguarded QOS modify shows up as a failure.
``modify qos ... set RawUsage=0`` resets the usage and silently drops any other setting in
the same command, as the real one does. A new QOS holds Slurm's defaults (priority 0, no
preempt list, preempt mode ``cluster``, usage factor 1, no flags, no ``GrpTRES``), printed
as ``show qos`` prints them (``UsageFactor=0`` as ``0.000000``, ``PreemptMode=requeue`` as
``requeue``, ``Flags=-1`` and ``GrpTRES=gres/gpu=-1`` as nothing, a ``Preempt`` list sorted by
name, as the real 22.05 prints it); ``Preempt=``
(or ``qos+=``, ``DefaultQOS=``) naming a QOS that does not exist is refused ("You gave a bad
qos"), and ``qos+=a,b`` adds each name of the list. Against
the clock ``FAKE_SLURM_NOW`` (also what the fake ``date`` prints): a reservation starting
more than 10 minutes in the past cannot be created ("Invalid time specified"), and a
begun one takes no new ``StartTime`` ("Reservation already started"); ``StartTime=now``
is stored as that clock. As the real one: account and QOS names and ``Description`` values
are lower-cased on ``add``, quotes in a value become backticks, and a reservation naming a
partition that is not in ``FAKE_SLURM_PARTITIONS`` (a JSON list, when set) is refused
("Invalid partition name specified"). State is a JSON file (``FAKE_SLURM_STATE``); every call
is appended to ``FAKE_SLURM_LOG`` as a JSON list of its arguments, one call a line.
"""

from __future__ import annotations

import json
import os
import sys
from datetime import datetime, timedelta
from pathlib import Path

QOS_DEFAULTS = {"priority": "0", "preempt": "", "preemptmode": "cluster",
                "usagefactor": "1.000000", "preemptexempttime": "", "flags": "",
                "grptres": ""}


def _pairs(words: list[str]) -> dict[str, str]:
    return dict(w.split("=", 1) for w in words if "=" in w)


def _shown(key: str, value: str) -> str:
    """A QOS setting as ``sacctmgr show qos`` prints it."""
    if key == "usagefactor":
        return f"{float(value):.6f}"
    if key == "preemptmode":
        return value.lower()
    if key == "preempt":  # the list sorted by name, whatever order it was given in
        return ",".join(sorted(filter(None, value.split(","))))
    if (key == "flags" and value == "-1") or (key == "grptres" and value.endswith("=-1")):
        return ""  # -1 clears
    return value


def _stored(key: str, value: str) -> str:
    """A value as sacctmgr 22.05 stores it: descriptions lower-cased, quotes as backticks."""
    value = value.replace("'", "`").replace('"', "`")
    if key in ("description", "organization"):
        value = value.lower()
    return _shown(key, value)


def _show(state: dict, kind: str, words: list[str]) -> int:
    """``show account|qos NAME [format=F]`` and ``show assoc account=NAME format=F``."""
    fields = _pairs(words)
    columns = fields.pop("format", "").split(",") if "format" in fields else None
    if kind == "assoc":  # the account's own association: user is empty, parent by name
        name = fields["account"]
        row = state.get("account", {}).get(name)
        if row is not None:
            values = {"user": "", "parentname": row["parent"], "share": row["fairshare"],
                      "qos": row.get("qos", ""), "defaultqos": row.get("defaultqos", "")}
            print("|".join(values[c] for c in columns))
        return 0
    name, row = words[0], state.get(kind, {}).get(words[0])
    if row is not None:
        print("|".join(row.get(c, "") for c in columns) if columns
              else f"{name}|{json.dumps(row, sort_keys=True)}")
    return 0


def _sacctmgr(state: dict, args: list[str]) -> int:
    args = [a for a in args if a not in ("-i", "-n", "-P")]
    if args[0] == "show":
        return _show(state, args[1], args[2:])
    verb, kind, name, rest = args[0], args[1], args[2], args[3:]
    table = state.setdefault(kind, {})
    if verb == "add":
        name = name.lower()  # sacctmgr stores account and QOS names in lower case
        if name in table:
            print(f" Nothing new added. {kind} {name} exists", file=sys.stderr)
            return 1
        table[name] = {**(QOS_DEFAULTS if kind == "qos" else {}),
                       **{k.lower(): _stored(k.lower(), v) for k, v in _pairs(rest).items()}}
        return 0
    if verb == "modify":
        if name not in table or rest[0] != "set":
            return 1
        settings = _pairs(rest[1:])
        if kind == "qos" and "RawUsage" in settings:  # as 22.05: resets usage, drops the rest
            table[name]["rawusage"] = "0"
            return 0
        named = ",".join(settings.get(key, "") for key in ("Preempt", "qos+", "DefaultQOS"))
        unknown = [q for q in named.split(",") if q and q not in state.get("qos", {})]
        if unknown:
            print(f"sacctmgr: error: You gave a bad qos '{unknown[0]}'.", file=sys.stderr)
            return 1
        before = json.dumps(table[name], sort_keys=True)
        for key, value in settings.items():
            if key.endswith("+"):
                have = set(filter(None, table[name].get(key[:-1].lower(), "").split(",")))
                table[name][key[:-1].lower()] = ",".join(sorted(have | set(value.split(","))))
            else:
                table[name][key.lower()] = _shown(key.lower(), value)
        if json.dumps(table[name], sort_keys=True) == before and not any(
                key.endswith("+") for key in settings):
            print(" Nothing modified")  # and exit 1, as sacctmgr does
            return 1
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
        shown = dict(table[name])
        if "EndTime" not in shown:  # as scontrol shows it: the end, whatever was given
            shown["EndTime"] = _plus(shown["StartTime"], shown["Duration"])
        fields = " ".join(f"{k}={v}" for k, v in sorted(shown.items()))
        print(f"ReservationName={name} {fields}")
        return 0
    now = os.environ["FAKE_SLURM_NOW"]
    if args[:2] == ["create", "reservation"]:
        fields = _pairs(args[2:])
        name = fields.pop("ReservationName")
        if name in table:
            return 1
        partitions = os.environ.get("FAKE_SLURM_PARTITIONS")
        if partitions is not None and fields.get("PartitionName") not in json.loads(partitions):
            print("Error creating the reservation: Invalid partition name specified",
                  file=sys.stderr)
            return 1
        if fields.get("StartTime", "now") < _minus_minutes(now, 10):
            print("Error creating the reservation: Invalid time specified", file=sys.stderr)
            return 1
        if fields.get("StartTime") == "now":
            fields["StartTime"] = now
        table[name] = fields
        return 0
    fields = _pairs(args[1:])
    name = fields.pop("ReservationName")
    if name not in table:
        return 1
    if args[0] == "update":
        if "StartTime" in fields and table[name]["StartTime"] <= now:
            print("Error updating the reservation: Reservation already started",
                  file=sys.stderr)
            return 1
        if "EndTime" in fields and "Duration" not in fields:
            table[name].pop("Duration", None)
        if "Duration" in fields:
            table[name].pop("EndTime", None)
        table[name].update(fields)
        return 0
    if args[0] == "delete":
        del table[name]
        return 0
    return 2


def _plus(stamp: str, duration: str) -> str:
    """``stamp`` plus a Slurm duration ``D-HH:MM:SS``."""
    days, _, clock = duration.rpartition("-")
    hours, minutes, seconds = (int(x) for x in clock.split(":"))
    end = datetime.fromisoformat(stamp) + timedelta(days=int(days or 0), hours=hours,
                                                    minutes=minutes, seconds=seconds)
    return end.isoformat()


def _minus_minutes(stamp: str, minutes: int) -> str:
    return (datetime.fromisoformat(stamp) - timedelta(minutes=minutes)).isoformat()


def main() -> int:
    """Dispatch on the command name given as the first argument."""
    state_file = Path(os.environ["FAKE_SLURM_STATE"])
    state = json.loads(state_file.read_text()) if state_file.exists() else {}
    with open(os.environ["FAKE_SLURM_LOG"], "a", encoding="utf-8") as log:
        log.write(json.dumps(sys.argv[1:]) + "\n")
    tool, args = sys.argv[1], sys.argv[2:]
    code = (_sacctmgr if tool == "sacctmgr" else _scontrol)(state, args)
    state_file.write_text(json.dumps(state, indent=1, sort_keys=True))
    return code


if __name__ == "__main__":
    sys.exit(main())
