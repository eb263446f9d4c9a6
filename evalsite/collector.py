"""The cyclic garbage collector held off while a command's apps load.

Django's set-up (settings, the apps, their models and plug-ins) makes objects
that live as long as the process, and frees few: the collector's passes over
them while they are made find nothing to free, and were about 5% of every
``manage.py`` command's start (40 ms of CPU of an ``evalrun``). ``manage.py``
holds it off before Django is imported; the app's ``ready()``, the end of
the set-up, lets it run again. Only a hold taken here is let go: a process
that turned the collector off itself keeps it off.
"""

from __future__ import annotations

import gc

_held = False


def collector_hold() -> None:
    global _held
    if gc.isenabled():
        gc.disable()
        _held = True


def collector_release() -> None:
    global _held
    if _held:
        _held = False
        # What the set-up made is moved out of the collector's sight first:
        # its first pass would otherwise walk all of it at once.
        gc.freeze()
        gc.enable()
