"""A project's OpenAI-compatible ``/embeddings`` endpoint, for content clusters.

A project may name one (``Project.embeddings``: base URL, model, and the key
as a project secret or an allowed environment variable, declared as every
chat endpoint declares it, ``EndpointParams``); its failing items are then
clustered by the endpoint's vectors instead of TF-IDF. Requests go through
the operator's network policy (``PolicyClient``), in batches of ``BATCH``
texts, at most ``PARALLEL`` at a time; a refusal, an error status or an
answer without one vector per text is an ``EmbeddingsFailed``, never a
page's error: the clusters fall back to TF-IDF and say why.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import numpy as np
from asgiref.sync import async_to_sync
from numpy.typing import NDArray
from pydantic import Field

from runs.calls.chat_client import SECRETS, EndpointParams, bearer_headers
from runs.calls.endpoint import EndpointURL
from runs.calls.http_client import Answer, PolicyClient, status_error
from runs.calls.netpolicy import endpoint_url
from runs.errors import InvalidInput
from runs.plugins import TargetContext
from runs.plugins.params import validate
from runs.plugins.targets import TargetError
from runs.secrets.store import resolve_secrets

BATCH = 256
PARALLEL = 4
# More failing items than this are clustered by TF-IDF (bounded cost).
MAX_TEXTS = 50_000
FIELD = "embeddings"


class EmbeddingsFailed(Exception):
    """The endpoint gave no usable vectors; the message says why."""


class EmbeddingsParams(EndpointParams):
    base_url: EndpointURL = Field(
        title="Base URL",
        description="The API's base URL, before /embeddings.",
        examples=["https://api.openai.com/v1"],
    )


def clean_embeddings(config: Any) -> dict[str, Any]:
    """A project's embeddings setting, validated ({} for none); InvalidInput
    naming ``embeddings.<field>`` otherwise."""
    if config in (None, {}):
        return {}
    if not isinstance(config, dict):
        raise InvalidInput("must be an object", field=FIELD)
    return validate(EmbeddingsParams, config, path=FIELD, noun="embeddings endpoint")


def embeddings_label(config: dict[str, Any]) -> str:
    """What names the vectoriser in stored clusters: ``tfidf`` or the model
    and endpoint."""
    if not config:
        return "tfidf"
    return f"embeddings:{config.get('model', '')}@{config.get('base_url', '')}"


def _vectors(answer: Answer, expected: int) -> list[list[float]]:
    if answer.status_code >= 400:
        raise EmbeddingsFailed(status_error(answer).message)
    try:
        rows = sorted(answer.json()["data"], key=lambda row: row["index"])
        vectors = [[float(x) for x in row["embedding"]] for row in rows]
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise EmbeddingsFailed(f"malformed answer: {type(exc).__name__}") from None
    if len(vectors) != expected or len({len(v) for v in vectors}) > 1:
        raise EmbeddingsFailed(
            f"answered {len(vectors)} vectors of unequal or wrong count "
            f"for {expected} texts"
        )
    return vectors


async def _embed(
    params: EmbeddingsParams, context: TargetContext, texts: Sequence[str]
) -> list[list[float]]:
    url = endpoint_url(params.base_url, "embeddings")
    headers = bearer_headers(params, context)
    client = PolicyClient()
    limit = asyncio.Semaphore(PARALLEL)

    async def batch(start: int) -> list[list[float]]:
        chunk = list(texts[start : start + BATCH])
        async with limit:
            answer = await client.send(
                "POST",
                url,
                headers=headers,
                body={"model": params.model, "input": chunk},
            )
        return _vectors(answer, len(chunk))

    try:
        parts = await asyncio.gather(
            *(batch(start) for start in range(0, len(texts), BATCH))
        )
    except TargetError as exc:
        raise EmbeddingsFailed(exc.message) from None
    finally:
        await client.aclose()
    return [vector for part in parts for vector in part]


def embed_texts(
    *, project_id: int, config: dict[str, Any], texts: Sequence[str]
) -> NDArray[np.float64]:
    """One vector per text from the project's endpoint (``config`` cleaned);
    EmbeddingsFailed when it cannot give them."""
    if len(texts) > MAX_TEXTS:
        raise EmbeddingsFailed(f"more than {MAX_TEXTS} texts")
    try:
        params = EmbeddingsParams.model_validate(config)
        secrets = resolve_secrets(project_id=project_id, refs=SECRETS, config=config)
    except (InvalidInput, ValueError) as exc:
        raise EmbeddingsFailed(str(exc)) from None
    context = TargetContext(project_id=project_id, secrets=secrets)
    try:
        vectors = async_to_sync(_embed)(params, context, texts) if texts else []
    except InvalidInput as exc:  # a key a header cannot carry
        raise EmbeddingsFailed(str(exc)) from None
    return np.asarray(vectors, dtype=np.float64).reshape(len(texts), -1)
