"""The job types and functions of test_typed.py, at a module's top level:
a worker process (``processes=N``) imports this module to find them."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import ClassVar, List, Optional

import barista


@dataclass
class Box:
    x: int
    y: int
    w: int
    h: int


@dataclass
class Resize:
    kind: ClassVar[str] = "resize-typed"
    image: str
    width: int
    crop: Optional[Box] = None
    tags: List[str] = field(default_factory=list)


@dataclass
class Crunch:
    kind: ClassVar[str] = "crunch"
    cpu_ms: int


def crunch(ctx: barista.JobContext[Crunch]) -> str:
    """Spends ctx.args.cpu_ms of CPU, and says which process did."""
    end = time.thread_time() + ctx.args.cpu_ms / 1000
    while time.thread_time() < end:
        pass
    return f"{os.getpid()} {type(ctx.args).__name__} {ctx.job_id}"
