"""Model instances from the rows of compiled reads (``values()`` tuples),
mapped by column name, as ``Model.from_db`` builds them for the ORM."""

from __future__ import annotations

import functools
import operator
from typing import Any

from django.db import connection
from django.db.models import Model


@functools.cache
def attnames(model: type[Model]) -> tuple[str, ...]:
    """The model's concrete columns' attribute names, in its order."""
    return tuple(field.attname for field in model._meta.concrete_fields)


@functools.cache
def _model_columns(
    model: type[Model], names: tuple[str, ...], prefix: str
) -> operator.itemgetter[Any]:
    """A getter of the values of the model's columns, in the model's order,
    from rows with these column names (the model's under ``prefix``)."""
    return operator.itemgetter(*(names.index(prefix + n) for n in attnames(model)))


def model_instance(
    model: type[Model], names: tuple[str, ...], row: tuple[Any, ...], prefix: str = ""
) -> Any:
    """``model.from_db`` on the row's values of the model's columns."""
    values = _model_columns(model, names, prefix)(row)
    return model.from_db(connection.alias, attnames(model), values)
