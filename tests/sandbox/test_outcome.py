"""How an ended program is described: the error that ended it, even when
forked children were killed while they printed theirs."""

from __future__ import annotations

from runs.sandbox.outcome import Outcome

ENDED = (
    "Traceback (most recent call last):\n"
    '  File "<program>", line 5, in <module>\n'
    "    os.fork()\n"
    "BlockingIOError: [Errno 11] Resource temporarily unavailable\n"
)
# A child killed after its traceback's header and frame, before its error.
CUT = 'Traceback (most recent call last):\n  File "<program>", line 5, in <module>\n'


def test_tracebacks_cut_off_after_the_error_do_not_hide_it():
    outcome = Outcome("limits", 1, output=(ENDED + CUT * 3).encode())
    assert outcome.headline() == "BlockingIOError while loading the completion"
    reason = outcome.describe()
    assert reason.endswith(
        "BlockingIOError: [Errno 11] Resource temporarily unavailable"
    )
    assert "exit status 1" in reason


def test_a_cut_frame_without_its_header_is_left_out_too():
    outcome = Outcome("limits", 1, output=(ENDED + CUT + "    os.fork()\n").encode())
    assert outcome.tail().endswith("Resource temporarily unavailable")


def test_interleaved_headers_still_find_the_last_complete_traceback():
    output = ENDED + "Traceback (most recent call last):\n" + ENDED + CUT
    outcome = Outcome("limits", 1, output=output.encode())
    assert outcome.exception() == ("BlockingIOError", "while loading the completion")


def test_output_of_its_own_that_ends_indented_is_kept_whole():
    output = "results:\n  first\n  second\n"
    assert Outcome("limits", 3, output=output.encode()).tail() == output.rstrip()


def test_a_traceback_without_its_error_is_no_exception():
    assert Outcome("limits", 1, output=CUT.encode()).exception() is None
    assert Outcome("limits", 1, output=CUT.encode()).headline() == "exit status 1"
