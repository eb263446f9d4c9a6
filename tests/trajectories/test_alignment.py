"""The alignment of trajectories: rows on the first run's steps."""

from __future__ import annotations

from runs.trajectories.alignment import align, first_divergence


def cells(*sequences: str) -> list[tuple[int | None, ...]]:
    return [row.cells for row in align([list(s) for s in sequences])]


def test_equal_sequences_share_every_row() -> None:
    rows = align([list("abc"), list("abc")])
    assert [row.cells for row in rows] == [(0, 0), (1, 1), (2, 2)]
    assert first_divergence(rows) is None


def test_a_deleted_step_leaves_a_gap_in_its_run() -> None:
    assert cells("abc", "ac") == [(0, 0), (1, None), (2, 1)]


def test_an_inserted_step_gets_a_row_of_its_own() -> None:
    assert cells("ac", "abc") == [(0, 0), (None, 1), (1, 2)]


def test_a_changed_step_shares_the_row_of_the_one_it_replaced() -> None:
    rows = align([list("axc"), list("ayc")])
    assert [row.cells for row in rows] == [(0, 0), (1, 1), (2, 2)]
    assert [row.same for row in rows] == [True, False, True]
    assert first_divergence(rows) == 1


def test_insertions_of_several_runs_in_one_gap_are_stacked() -> None:
    assert cells("ad", "abd", "abcd") == [
        (0, 0, 0),
        (None, 1, 1),
        (None, None, 2),
        (1, 2, 3),
    ]


def test_an_empty_trajectory_is_all_gaps() -> None:
    assert cells("ab", "") == [(0, None), (1, None)]
    assert cells("", "ab") == [(None, 0), (None, 1)]


def test_rows_are_read_a_slice_at_a_time() -> None:
    rows = align([list("abcd"), list("abxd")])
    assert len(rows) == 4
    assert [row.cells for row in rows[1:3]] == [(1, 1), (2, 2)]
    assert rows[-1].cells == (3, 3)
    assert rows.first_divergence == 2
