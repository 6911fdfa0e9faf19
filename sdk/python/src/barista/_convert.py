"""Conversions between the SDK's Python values (timedelta, datetime, size
and priority names) and the wire's (milliseconds, enums)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Dict, Optional, Union

from ._proto import client_pb2
from ._proto import types_pb2 as cpb
from .errors import InvalidArgument

Duration = Union[timedelta, int, float]

SIZES: Dict[str, cpb.Size] = {"sm": cpb.SM, "md": cpb.MD, "lg": cpb.LG}
SIZE_NAMES: Dict[int, str] = {int(v): k for k, v in SIZES.items()}

PRIORITIES: Dict[str, cpb.Class] = {"critical": cpb.CRITICAL, "high": cpb.HIGH, "normal": cpb.NORMAL, "low": cpb.LOW}
PRIORITY_NAMES: Dict[int, str] = {int(v): k for k, v in PRIORITIES.items()}

TIERS: Dict[str, cpb.Tier] = {"free": cpb.FREE, "bronze": cpb.BRONZE, "silver": cpb.SILVER, "gold": cpb.GOLD,
                              "diamond": cpb.DIAMOND}
TIER_NAMES: Dict[int, str] = {int(v): k for k, v in TIERS.items()}

# The bound of a job's output tails (internal/text.MaxOutputTail).
MAX_OUTPUT_TAIL = 4096

GROUP_ORDERS: Dict[str, cpb.GroupOrder] = {"fifo": cpb.GROUP_FIFO, "fair": cpb.GROUP_FAIR}

# A job's forms (SPEC §3 "Kinds"): which workers run it.
FORMS: Dict[str, cpb.JobForm] = {"any": cpb.JOB_FORM_UNSPECIFIED, "command": cpb.COMMAND, "function": cpb.FUNCTION}
FORM_NAMES: Dict[int, str] = {int(v): k for k, v in FORMS.items()}


def size(value: str, what: str = "size") -> cpb.Size:
    """The Size of "sm", "md" or "lg"."""
    try:
        return SIZES[value.lower()]
    except (KeyError, AttributeError):
        raise InvalidArgument(f"{what}: {value!r} (want sm, md or lg)", field=what) from None


def size_name(value: int) -> str:
    return SIZE_NAMES.get(value, "sm")


def job_form(value: Optional[str], kind: str) -> cpb.JobForm:
    """The JobForm of a submit: None is a function job of its kind when
    it names one, else a job any worker runs; "function" needs a kind."""
    if value is None:
        return cpb.FUNCTION if kind else cpb.JOB_FORM_UNSPECIFIED
    try:
        form = FORMS[value.lower()]
    except (KeyError, AttributeError):
        raise InvalidArgument(f"form: {value!r} (want function, command or any)", field="form") from None
    if form == cpb.FUNCTION and not kind:
        raise InvalidArgument("form: a function job names its kind", field="form")
    return form


def form_name(value: int) -> str:
    return FORM_NAMES.get(value, "any")


def priority(value: Optional[str]) -> cpb.Class:
    """The Class of a priority name; None is the normal class."""
    if value is None:
        return cpb.CLASS_UNSPECIFIED
    try:
        return PRIORITIES[value.lower()]
    except (KeyError, AttributeError):
        raise InvalidArgument(f"priority: {value!r} (want critical, high, normal or low)", field="priority") from None


def priority_name(value: int) -> str:
    return PRIORITY_NAMES.get(value, "normal")


def tier(value: str) -> cpb.Tier:
    try:
        return TIERS[value.lower()]
    except (KeyError, AttributeError):
        raise InvalidArgument(f"tier: {value!r} (want free, bronze, silver, gold or diamond)", field="tier") from None


def tier_name(value: int) -> str:
    return TIER_NAMES.get(value, "")


def group_order(value: str) -> cpb.GroupOrder:
    try:
        return GROUP_ORDERS[value.lower()]
    except (KeyError, AttributeError):
        raise InvalidArgument(f"group_order: {value!r} (want fifo or fair)", field="group_order") from None


def group_order_name(value: int) -> str:
    return "fair" if value == cpb.GROUP_FAIR else "fifo"


def millis(value: Optional[Duration], what: str) -> int:
    """A duration (a timedelta, or seconds as a number) in whole
    milliseconds, rounded to the nearest; None is 0 (left out). A negative
    duration, or a positive one under half a millisecond, is refused: the
    wire would read 0 as "none"."""
    if value is None:
        return 0
    if isinstance(value, timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        seconds = float(value)
    else:
        raise InvalidArgument(f"{what}: {value!r} is not a timedelta or a number of seconds", field=what)
    if seconds < 0:
        raise InvalidArgument(f"{what}: {value!r} is negative", field=what)
    ms = round(seconds * 1000)
    if seconds > 0 and ms == 0:
        raise InvalidArgument(f"{what}: {value!r} is under a millisecond", field=what)
    return ms


def deadline_millis(value: Union[datetime, timedelta, int, float, None], now: datetime) -> int:
    """A deadline (a datetime, or a duration from now) as milliseconds from
    the submit. A naive datetime is refused: its time zone is unknown."""
    if value is None:
        return 0
    if isinstance(value, datetime):
        if value.tzinfo is None:
            raise InvalidArgument("deadline: a naive datetime (give it a tzinfo, e.g. timezone.utc)", field="deadline")
        left = value - now
        if left <= timedelta(0):
            raise InvalidArgument(f"deadline: {value.isoformat()} has passed", field="deadline")
        return max(1, round(left.total_seconds() * 1000))
    return millis(value, "deadline")


def from_ms(ms: int) -> timedelta:
    return timedelta(milliseconds=ms)


def opt_ms(ms: int) -> Optional[timedelta]:
    """A duration in ms where 0 means none."""
    return timedelta(milliseconds=ms) if ms else None


def wall(ms: int) -> Optional[datetime]:
    """A wall clock in ms since the epoch (0: none) as an aware datetime."""
    if not ms:
        return None
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc)


def cluster_to_wall(now: Optional[client_pb2.ClockNow], cluster_ms: int) -> Optional[datetime]:
    """The wall time of a cluster time of an answer, by the answer's
    ClockNow (cluster time pauses while no leader runs, so it is not a
    wall time itself); None for 0 (none) or an answer without ClockNow."""
    if not cluster_ms or now is None or not now.wall_ms:
        return None
    return wall(now.wall_ms + (cluster_ms - now.cluster_ms))


def output_tail(text: Union[str, bytes, None]) -> str:
    """The last 4 KiB of an output as valid UTF-8, cut at a character
    boundary (what a Finished's tails hold)."""
    if text is None:
        return ""
    if isinstance(text, str):
        data = text.encode("utf-8", "replace")
    else:
        data = bytes(text)
    data = data[-4 * MAX_OUTPUT_TAIL:]
    s = data.decode("utf-8", "replace")
    data = s.encode("utf-8")
    if len(data) <= MAX_OUTPUT_TAIL:
        return s
    data = data[-MAX_OUTPUT_TAIL:]
    # Skip continuation bytes: start at a character's first byte.
    i = 0
    while i < len(data) and (data[i] & 0xC0) == 0x80:
        i += 1
    return data[i:].decode("utf-8")
