"""The executor's wall clock: moments of results, and ISO texts of attempts."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime

__all__ = ["IsoClock", "iso_now", "now"]


def now() -> datetime:
    # timezone.now() with USE_TZ (always on here), without its look-up of the
    # setting: twice an item.
    return datetime.now(UTC)


class IsoClock:
    """``datetime.now(UTC).isoformat()``, the same text, for less: the
    date and time to the second are formatted once a second, and each read
    adds its microseconds. Every attempt of a run is logged with two (its
    start and end), and ``isoformat`` costs more than the rest of an
    attempt's record."""

    __slots__ = ("clock", "second")

    def __init__(self, clock: Callable[[], int] = time.time_ns) -> None:
        # Nanoseconds since the epoch (``time.time_ns``: the clock
        # ``datetime.now`` reads, cut to microseconds the same way, down).
        self.clock = clock
        # (second, its text): one tuple, replaced whole, so that loops in
        # other threads never read one second's number with another's text.
        self.second: tuple[int, str] = (-1, "")

    def __call__(self) -> str:
        second, micro = divmod(self.clock() // 1000, 1_000_000)
        known = self.second
        if known[0] != second:
            # "YYYY-MM-DDTHH:MM:SS", as isoformat gives it for this second.
            text = datetime.fromtimestamp(second, UTC).isoformat()[:-6]
            known = self.second = (second, text)
        if micro:
            return f"{known[1]}.{micro:06d}+00:00"
        return known[1] + "+00:00"  # isoformat leaves out zero microseconds


iso_now = IsoClock()
