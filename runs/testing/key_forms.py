"""The forms in which a hostile endpoint echoes the key it was sent.

The fake servers echo a key in one of ``FORMS`` on request (the fake model
server's ``[[echo_key:FORM]]`` marker); ``traces`` lists what must then be
found nowhere a result is stored or shown.
"""

from __future__ import annotations

import base64
from collections.abc import Callable


def _unicode(key: str) -> str:
    return "".join(f"\\u{ord(char):04x}" for char in key)


FORMS: dict[str, Callable[[str], str]] = {
    "exact": lambda key: key,
    "reversed": lambda key: key[::-1],
    # The whole header, as a proxy that logs it would encode it.
    "base64": lambda key: base64.b64encode(f"Bearer {key}".encode()).decode(),
    "base64url": lambda key: base64.urlsafe_b64encode(key.encode()).decode(),
    "hex": lambda key: key.encode().hex(),
    "spaced": lambda key: " ".join(key),
    # As JSON text: the endpoint's body writes every character as \uXXXX.
    "unicode": _unicode,
    "url": lambda key: "".join(f"%{byte:02X}" for byte in key.encode()),
    "html": lambda key: "".join(f"&#{ord(char)};" for char in key),
}


def echoed(key: str, form: str) -> str:
    """``key`` in ``form`` (one of ``FORMS``)."""
    return FORMS[form](key)


def traces(key: str) -> dict[str, str]:
    """Every form of ``key``, and the part of its base64 that encodes only
    the key's bytes at each of the three byte offsets (what any base64 of a
    text holding the key contains)."""
    found = {form: encode(key) for form, encode in FORMS.items()}
    data = key.encode()
    for skip in range(3):
        body = data[skip:]
        body = body[: len(body) // 3 * 3]
        middle = base64.b64encode(body).decode()
        found[f"base64 at offset {skip}"] = middle
        found[f"base64url at offset {skip}"] = middle.translate(
            str.maketrans("+/", "-_")
        )
    return found


def leaks(text: str, key: str) -> list[str]:
    """The forms of ``key`` that ``text`` holds (none, when it is clean)."""
    lowered = text.lower()
    return [
        form
        for form, trace in traces(key).items()
        if trace in text or (form == "hex" and trace.lower() in lowered)
    ]
