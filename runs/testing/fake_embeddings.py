"""The fake model server's ``/embeddings``: deterministic vectors.

A text's vector is its bag of words hashed into ``DIMENSIONS`` buckets and
scaled to unit length, so texts that share words are near each other and the
same text always gets the same vector. Tests of content clusters rely on it.
"""

from __future__ import annotations

import hashlib
import math
import re
from typing import Any

DIMENSIONS = 64
_WORD = re.compile(r"[^\W\d_]{2,}")


def vector(text: str) -> list[float]:
    counts = [0.0] * DIMENSIONS
    for word in _WORD.findall(text.lower()):
        digest = hashlib.blake2b(word.encode(), digest_size=4).digest()
        counts[int.from_bytes(digest, "big") % DIMENSIONS] += 1.0
    norm = math.sqrt(sum(x * x for x in counts)) or 1.0
    return [x / norm for x in counts]


def embeddings_answer(request: Any) -> tuple[int, dict[str, Any]]:
    """The status and body answering an embeddings request."""
    texts = request.get("input") if isinstance(request, dict) else None
    if isinstance(texts, str):
        texts = [texts]
    if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
        return 400, {"error": {"message": "input must be a string or strings"}}
    return 200, {
        "object": "list",
        "model": request.get("model", ""),
        "data": [
            {"object": "embedding", "index": i, "embedding": vector(text)}
            for i, text in enumerate(texts)
        ],
        "usage": {"prompt_tokens": sum(len(t.split()) for t in texts)},
    }
