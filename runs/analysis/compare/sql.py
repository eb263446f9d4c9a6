"""The comparison's hand SQL: what the ORM cannot express, in one place.

One pass over the results of both runs, grouped by the pairing key, with
each run's figures as conditional aggregates: the per-item aggregates of the
two runs side by side (a join of two grouped scans was about twice as slow),
then conditional counts over them in the same statement. The ORM has no
common table expression and no aggregate over an aggregate, hence SQL.

Every value is a named parameter (``%(baseline)s``, ``%(candidate)s``,
``%(scorer)s``...); the only names written into the text are the tables and
columns of ``Result``, ``Score`` and ``Item``, taken from their ``_meta`` and
quoted by the connection (``names``), and this module's own aliases.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from django.db import connection, models

from runs.analysis import summary
from runs.models import Item, Result, Score


@dataclass(frozen=True, slots=True)
class Names:
    """Quoted tables and columns, from the models' ``_meta``: each table, then
    the columns read of it, in the order ``names`` gives them."""

    result: str
    result_id: str
    run: str
    item: str
    item_index: str
    output: str
    status: str
    error_type: str
    score: str
    score_result: str
    scorer: str
    value: str
    passed: str
    skipped: str
    items: str
    item_id: str
    external_id: str


def _column(model: type[models.Model], name: str) -> str:
    field = model._meta.get_field(name)
    assert isinstance(field, models.Field) and field.column
    return connection.ops.quote_name(field.column)


def _table(model: type[models.Model], *fields: str) -> list[str]:
    """The model's quoted table, then the quoted columns of ``fields``."""
    table = connection.ops.quote_name(model._meta.db_table)
    return [table, *(_column(model, name) for name in fields)]


@functools.cache
def names() -> Names:
    return Names(
        *_table(
            Result, "id", "run", "item", "item_index", "output", "status", "error_type"
        ),
        *_table(Score, "result", "scorer", "value", "passed", "skipped"),
        *_table(Item, "id", "external_id"),
    )


@dataclass(frozen=True, slots=True)
class Pairing:
    """Which per-item query pairs two runs, and its parameters.

    ``one_each``: both runs over one dataset version with one epoch, so at
    most one result per item in each and the results pair without grouping.
    ``by_external_id``: items pair by external id (across dataset versions).
    """

    baseline: int
    candidate: int
    scorer: str
    one_each: bool
    by_external_id: bool

    @property
    def params(self) -> dict[str, Any]:
        return {
            "baseline": self.baseline,
            "candidate": self.candidate,
            "scorer": self.scorer,
            **{name: name for name in CELLS},
            **STOPPED_PARAMS,
        }


def _graded(score: str) -> str:
    v = f"{score}.{names().value}"
    return f"CASE WHEN {v} IS NOT NULL AND {v} <> 0 AND {v} <> 1 THEN 1 ELSE 0 END"


def _kept(score: str) -> str:
    """The score (or its absence: the call failed) counts for the item."""
    return f"NOT COALESCE({score}.{names().skipped}, FALSE)"


# The values ``stopped`` compares with (``STOPPED_IN_FLIGHT`` of the models),
# by name: the summary's, in its order.
STOPPED_PARAMS = dict(
    zip(
        ("stopped_status", "deadline_status", "deadline_type"),
        summary.STOPPED_PARAMS,
        strict=True,
    )
)


def stopped(result: str) -> str:
    """The result was stopped in flight: its call cut short by its run's stop
    (``STOPPED_IN_FLIGHT``). It is no sample: neither kept nor skipped."""
    n = names()
    return (
        f"({result}.{n.status} = %(stopped_status)s OR ({result}.{n.status} = "
        f"%(deadline_status)s AND {result}.{n.error_type} = %(deadline_type)s))"
    )


def per_item(pairing: Pairing, *, locate: bool = False) -> str:
    """Per-item aggregates of both runs for one scorer.

    ``bn``/``cn``: results (epochs) of the item in the baseline / candidate
    whose score was not skipped and that were not stopped in flight;
    ``bx``/``cx``: those stopped in flight; ``bs``/``cs``: the others (their
    score was skipped);
    ``bp``/``cp``: those that passed; ``bt``/``ct``: sum of values. With
    ``locate``, each run's first result and item, and the dataset position.
    A result without a score of this scorer (its call failed) or whose score
    errored counts as not passed, value 0.
    """
    n = names()
    if pairing.one_each:
        # Only paired items appear; what is unpaired is counted apart.
        return f"""
        SELECT rb.{n.item} AS k,
          CASE WHEN {stopped("rb")} THEN 0 WHEN {_kept("sb")} THEN 1 ELSE 0 END AS bn,
          CASE WHEN {stopped("rb")} THEN 0 WHEN {_kept("sb")} THEN 0 ELSE 1 END AS bs,
          CASE WHEN {stopped("rb")} THEN 1 ELSE 0 END AS bx,
          CASE WHEN sb.{n.passed} THEN 1 ELSE 0 END AS bp,
          COALESCE(sb.{n.value}, 0) AS bt,
          CASE WHEN {stopped("rc")} THEN 0 WHEN {_kept("sc")} THEN 1 ELSE 0 END AS cn,
          CASE WHEN {stopped("rc")} THEN 0 WHEN {_kept("sc")} THEN 0 ELSE 1 END AS cs,
          CASE WHEN {stopped("rc")} THEN 1 ELSE 0 END AS cx,
          CASE WHEN sc.{n.passed} THEN 1 ELSE 0 END AS cp,
          COALESCE(sc.{n.value}, 0) AS ct,
          {_graded("sb")} + {_graded("sc")} AS graded,
          rb.{n.result_id} AS b_result, rc.{n.result_id} AS c_result,
          rb.{n.item} AS b_item, rc.{n.item} AS c_item,
          rb.{n.item_index} AS idx
        FROM {n.result} rb
        JOIN {n.result} rc
          ON rc.{n.run} = %(candidate)s AND rc.{n.item} = rb.{n.item}
        LEFT JOIN {n.score} sb
          ON sb.{n.score_result} = rb.{n.result_id} AND sb.{n.scorer} = %(scorer)s
        LEFT JOIN {n.score} sc
          ON sc.{n.score_result} = rc.{n.result_id} AND sc.{n.scorer} = %(scorer)s
        WHERE rb.{n.run} = %(baseline)s"""
    key = f"i.{n.external_id}" if pairing.by_external_id else f"r.{n.item}"
    join = (
        f"JOIN {n.items} i ON i.{n.item_id} = r.{n.item}"
        if pairing.by_external_id
        else ""
    )
    cut = stopped("r")
    kept = f"NOT {cut} AND {_kept('s')}"
    b, c = f"r.{n.run} = %(baseline)s", f"r.{n.run} = %(candidate)s"
    located = ""
    if locate:
        located = f""",
          MIN(CASE WHEN {b} THEN r.{n.result_id} END) AS b_result,
          MIN(CASE WHEN {c} THEN r.{n.result_id} END) AS c_result,
          MIN(CASE WHEN {b} THEN r.{n.item} END) AS b_item,
          MIN(CASE WHEN {c} THEN r.{n.item} END) AS c_item,
          MIN(CASE WHEN {b} THEN r.{n.item_index} END) AS idx"""
    return f"""
        SELECT {key} AS k,
          SUM(CASE WHEN {b} AND {kept} THEN 1 ELSE 0 END) AS bn,
          SUM(CASE WHEN {b} AND {kept} THEN 0 WHEN {b} THEN 1 ELSE 0 END) AS bs,
          SUM(CASE WHEN {b} AND {cut} THEN 1 ELSE 0 END) AS bx,
          SUM(CASE WHEN {b} AND s.{n.passed} THEN 1 ELSE 0 END) AS bp,
          SUM(CASE WHEN {b} THEN COALESCE(s.{n.value}, 0) ELSE 0 END) AS bt,
          SUM(CASE WHEN {c} AND {kept} THEN 1 ELSE 0 END) AS cn,
          SUM(CASE WHEN {c} AND {kept} THEN 0 WHEN {c} THEN 1 ELSE 0 END) AS cs,
          SUM(CASE WHEN {c} AND {cut} THEN 1 ELSE 0 END) AS cx,
          SUM(CASE WHEN {c} AND s.{n.passed} THEN 1 ELSE 0 END) AS cp,
          SUM(CASE WHEN {c} THEN COALESCE(s.{n.value}, 0) ELSE 0 END) AS ct,
          SUM({_graded("s")}) AS graded{located}
        FROM {n.result} r {join}
        LEFT JOIN {n.score} s
          ON s.{n.score_result} = r.{n.result_id} AND s.{n.scorer} = %(scorer)s
        WHERE r.{n.run} IN (%(baseline)s, %(candidate)s)
        GROUP BY {key}"""


PAIRED = "p.bn > 0 AND p.cn > 0"
_IN_BOTH = "p.bn + p.bs + p.bx > 0 AND p.cn + p.cs + p.cx > 0"
# In both runs, but stopped in flight in every kept epoch of either (no
# sample there): not a pair.
_STOPPED = f"{_IN_BOTH} AND ((p.bn = 0 AND p.bx > 0) OR (p.cn = 0 AND p.cx > 0))"
# In both runs, but skipped in every epoch of either: not a pair.
_SKIPPED = f"{_IN_BOTH} AND NOT ({PAIRED}) AND NOT ({_STOPPED})"
_B_PASSED = "2 * p.bp >= p.bn"
_C_PASSED = "2 * p.cp >= p.cn"
# The four cells of a paired table, by name (also the per-item ``change``).
CELLS = {
    "both_passed": f"{_B_PASSED} AND {_C_PASSED}",
    "regressions": f"{_B_PASSED} AND NOT ({_C_PASSED})",
    "improvements": f"NOT ({_B_PASSED}) AND {_C_PASSED}",
    "both_failed": f"NOT ({_B_PASSED}) AND NOT ({_C_PASSED})",
}


def _mean(column: str, n: str) -> str:
    return f"CAST(p.{column} AS DOUBLE PRECISION) / p.{n}"


def _when_paired(expression: str) -> str:
    return f"SUM(CASE WHEN {PAIRED} THEN {expression} ELSE 0 END)"


def _items_of(pairing: Pairing) -> tuple[str, str]:
    """How many items each run has results for."""
    if pairing.one_each:
        n = names()
        baseline, candidate = (
            f"(SELECT COUNT(*) FROM {n.result} WHERE {n.run} = %({run})s)"
            for run in ("baseline", "candidate")
        )
        return baseline, candidate
    return (
        "SUM(CASE WHEN p.bn + p.bs + p.bx > 0 THEN 1 ELSE 0 END)",
        "SUM(CASE WHEN p.cn + p.cs + p.cx > 0 THEN 1 ELSE 0 END)",
    )


def paired_table_row(pairing: Pairing) -> tuple[Any, ...]:
    """The paired table of one scorer, in one aggregate query: paired, the
    four cells, both runs' pass and value sums over the pairs, the items
    whose epochs disagree, the graded scores, each run's items, skipped,
    stopped in flight."""
    baseline_items, candidate_items = _items_of(pairing)
    cells = ",\n".join(
        f"SUM(CASE WHEN {PAIRED} AND {condition} THEN 1 ELSE 0 END)"
        for condition in CELLS.values()
    )
    sql = f"""WITH p AS ({per_item(pairing)})
        SELECT {_when_paired("1")},
          {cells},
          {_when_paired(_mean("bp", "bn"))}, {_when_paired(_mean("cp", "cn"))},
          {_when_paired(_mean("bt", "bn"))}, {_when_paired(_mean("ct", "cn"))},
          SUM(CASE WHEN {PAIRED} AND NOT (p.bp IN (0, p.bn) AND p.cp IN (0, p.cn))
              THEN 1 ELSE 0 END),
          {_when_paired("p.graded")},
          {baseline_items}, {candidate_items},
          SUM(CASE WHEN {_SKIPPED} THEN 1 ELSE 0 END),
          SUM(CASE WHEN {_STOPPED} THEN 1 ELSE 0 END)
        FROM p"""
    with connection.cursor() as cursor:
        cursor.execute(sql, pairing.params)
        return tuple(cursor.fetchone())


def difference_rows(pairing: Pairing, column: str) -> list[tuple[Any, int]]:
    """Distinct per-item differences (candidate - baseline) and their counts;
    ``column`` is ``passes`` (pass fractions) or ``total`` (mean values)."""
    letter = {"passes": "p", "total": "t"}[column]
    difference = f"{_mean(f'c{letter}', 'cn')} - {_mean(f'b{letter}', 'bn')}"
    sql = f"""WITH p AS ({per_item(pairing)})
        SELECT d, COUNT(*) FROM (
          SELECT {difference} AS d FROM p WHERE {PAIRED}
        ) differences GROUP BY d"""
    with connection.cursor() as cursor:
        cursor.execute(sql, pairing.params)
        return cursor.fetchall()


def single_scan_rows(
    baseline: int, candidate: int, scorers: Sequence[str]
) -> list[tuple[Any, ...]]:
    """Per paired item of two runs with one result per item, for each scorer:
    its state as one number (8 when stopped in flight in either run, else 4
    when skipped in either, + 2 when the baseline passed, + 1 when the
    candidate did), then each run's value (0
    without one). Three columns a scorer: turning rows into Python is most of
    what reading them costs."""
    n = names()
    columns: list[str] = []
    joins: list[str] = []
    params: dict[str, Any] = {
        "baseline": baseline,
        "candidate": candidate,
        **STOPPED_PARAMS,
    }
    cut = f"{stopped('rb')} OR {stopped('rc')}"
    for j, scorer in enumerate(scorers):
        params[f"scorer{j}"] = scorer
        b, c = f"b{j}", f"c{j}"
        columns.append(
            f"CASE WHEN {cut} THEN 8 WHEN {_kept(b)} AND {_kept(c)} THEN 0 ELSE 4 END"
            f" + CASE WHEN {b}.{n.passed} THEN 2 ELSE 0 END"
            f" + CASE WHEN {c}.{n.passed} THEN 1 ELSE 0 END, "
            f"COALESCE({b}.{n.value}, 0), COALESCE({c}.{n.value}, 0)"
        )
        joins.extend(
            f"LEFT JOIN {n.score} {alias} ON {alias}.{n.score_result} = "
            f"{run}.{n.result_id} AND {alias}.{n.scorer} = %(scorer{j})s"
            for alias, run in ((b, "rb"), (c, "rc"))
        )
    sql = f"""SELECT {", ".join(columns)}
        FROM {n.result} rb
        JOIN {n.result} rc
          ON rc.{n.run} = %(candidate)s AND rc.{n.item} = rb.{n.item}
        {" ".join(joins)}
        WHERE rb.{n.run} = %(baseline)s"""
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


# -- the paired items, one (candidate, scorer) at a time ---------------------------


def _change_case() -> str:
    """The item's cell, by name (the names are parameters, ``Pairing.params``)."""
    whens = " ".join(
        f"WHEN {condition} THEN %({name})s" for name, condition in CELLS.items()
    )
    return f"CASE {whens} END"


def _items_from(pairing: Pairing, change: str | None) -> str:
    """FROM and WHERE of the paired items that ``change`` keeps (a cell's
    name, ``output_changed``, or None for all)."""
    n = names()
    outputs = ""
    where = PAIRED
    if change in CELLS:
        where += f" AND {CELLS[change]}"
    elif change == "output_changed":
        outputs = f"""JOIN {n.result} rb ON rb.{n.result_id} = p.b_result
        JOIN {n.result} rc ON rc.{n.result_id} = p.c_result"""
        distinct = "IS DISTINCT FROM" if connection.vendor == "postgresql" else "IS NOT"
        where += f" AND rb.{n.output} {distinct} rc.{n.output}"
    return f"""WITH p AS ({per_item(pairing, locate=True)})
        SELECT {{columns}}
        FROM p {outputs}
        WHERE {where}"""


def item_count(pairing: Pairing, change: str | None) -> int:
    sql = _items_from(pairing, change).format(columns="COUNT(*)")
    with connection.cursor() as cursor:
        cursor.execute(sql, pairing.params)
        return int(cursor.fetchone()[0])


def item_rows(
    pairing: Pairing,
    change: str | None,
    *,
    limit: int | None = None,
    offset: int = 0,
    chunk: int = 500,
) -> Iterator[list[tuple[Any, ...]]]:
    """The paired items in dataset order, ``chunk`` rows at a time: key,
    baseline and candidate item, baseline and candidate result, index, bn,
    bp, bt, cn, cp, ct, change, bx, cx."""
    columns = (
        "p.k, p.b_item, p.c_item, p.b_result, p.c_result, "
        f"p.idx, p.bn, p.bp, p.bt, p.cn, p.cp, p.ct, {_change_case()}, p.bx, p.cx"
    )
    sql = _items_from(pairing, change).format(columns=columns) + " ORDER BY p.idx, p.k"
    params = pairing.params
    if limit is not None:
        sql += " LIMIT %(limit)s OFFSET %(offset)s"
        params |= {"limit": limit, "offset": offset}
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        while batch := cursor.fetchmany(chunk):
            yield batch
