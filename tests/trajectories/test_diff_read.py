"""The steps of a trajectory as the diff reads them: two aggregated lists."""

from __future__ import annotations

from runs.trajectories.selectors import in_index_order


def test_lists_aggregated_out_of_order_are_sorted_by_step_index() -> None:
    indexes, tokens = in_index_order("2,0,3,1", "c,,d,b")

    assert indexes == [0, 1, 2, 3]
    assert tokens == ["", "b", "c", "d"]


def test_lists_in_order_are_kept() -> None:
    assert in_index_order("0,1,2", ",a,") == ([0, 1, 2], ["", "a", ""])
    assert in_index_order("0", "") == ([0], [""])
