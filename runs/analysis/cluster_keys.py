"""Failure clusters' keys: an error signature, ``score:<scorer>:<signature>``
for a failing score, or ``content:<digest>`` for a cluster by content
(``content_clusters``), and the results each key stands for."""

from __future__ import annotations

import re

from django.db.models import Exists, OuterRef, Q

from runs.errors import InvalidInput
from runs.models import Score
from runs.records.signatures import FAILING_SCORE, SIGNATURE_LENGTH

SCORE_KEY_PREFIX = "score:"
CONTENT_KEY_PREFIX = "content:"

_SIGNATURE = re.compile(rf"[0-9a-f]{{{SIGNATURE_LENGTH}}}")
_CONTENT_KEY = re.compile(rf"{CONTENT_KEY_PREFIX}[0-9a-f]{{12}}")


def score_cluster_key(scorer: str, signature: str) -> str:
    return f"{SCORE_KEY_PREFIX}{scorer}:{signature}"


def is_content_key(key: str) -> bool:
    """A key of a cluster by content (checked by ``parse_cluster_key``)."""
    return key.startswith(CONTENT_KEY_PREFIX)


def parse_cluster_key(key: str) -> tuple[str | None, str]:
    """``(scorer, signature)`` of a key; the scorer is None for an error cluster.
    A content key is ``(None, key)``: its results are the run's (``cluster_filter``).

    Raises InvalidInput (field ``cluster``) for anything else.
    """
    if is_content_key(key):
        if not _CONTENT_KEY.fullmatch(key):
            raise InvalidInput(
                "a content cluster is content:<12 hexadecimal digits>",
                field="cluster",
            )
        return None, key
    scorer: str | None = None
    signature = key
    if key.startswith(SCORE_KEY_PREFIX):
        scorer, _, signature = key[len(SCORE_KEY_PREFIX) :].rpartition(":")
        if not scorer:
            raise InvalidInput(
                "a failing-score cluster is score:<scorer>:<signature>",
                field="cluster",
            )
    if not _SIGNATURE.fullmatch(signature):
        raise InvalidInput(
            f"not a cluster: a signature is {SIGNATURE_LENGTH} hexadecimal digits",
            field="cluster",
        )
    return scorer, signature


def cluster_filter(key: str) -> Q:
    """The results that belong to the cluster ``key`` (over ``Result``), for
    a key by signature (``cluster_members.cluster_filter`` takes every key)."""
    scorer, signature = parse_cluster_key(key)
    if is_content_key(key):
        raise InvalidInput("a content cluster is a run's", field="cluster")
    if scorer is None:
        return Q(error_signature=signature)
    failing = Score.objects.filter(
        FAILING_SCORE,
        result=OuterRef("pk"),
        scorer=scorer,
        reason_signature=signature,
    )
    return Q(Exists(failing))
