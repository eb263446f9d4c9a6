"""The redactor: every form of a secret replaced by a marker that tells nothing
of it, and ordinary text left as it was."""

from __future__ import annotations

import base64
import json
import random
import urllib.parse

import pytest

from runs.secrets.redaction import (
    MAX_CHARACTER_FORMS,
    MIN_ENCODED_CHARS,
    PIECE_CHARS,
    Redactor,
)
from runs.testing.key_forms import FORMS, echoed, leaks

KEY = "sk-proj-Zq81_vX0-Lm2Yw9tR4eB"
MARKER = "[redacted secret api_key]"


@pytest.fixture(scope="module")
def redactor() -> Redactor:
    return Redactor([("api_key", KEY)])


@pytest.mark.parametrize("form", sorted(FORMS))
def test_every_form_an_endpoint_echoes_is_replaced(
    redactor: Redactor, form: str
) -> None:
    text = f"Your key is {echoed(KEY, form)}, keep it safe."

    clean = redactor.text(text)

    assert leaks(clean, KEY) == []
    assert MARKER in clean
    assert clean.startswith("Your key is ")
    assert clean.endswith(", keep it safe.")


@pytest.mark.parametrize(
    "copy",
    [
        base64.b64encode(KEY.encode()).decode(),
        base64.b64encode(b"a" + KEY.encode()).decode(),
        base64.b64encode(b"ab" + KEY.encode()).decode(),
        base64.urlsafe_b64encode(b"\xff\xfe" + KEY.encode()).decode(),
        base64.encodebytes(("x" * 60 + KEY).encode()).decode(),  # wrapped lines
        KEY.encode().hex().upper(),
        ":".join(f"{byte:02x}" for byte in KEY.encode()),
        urllib.parse.quote(KEY),  # only what must be encoded
        "-".join(KEY),
        "\u200b".join(KEY),  # zero-width spaces
        "<b>" + "</b><b>".join(KEY) + "</b>",
        "".join(f"&#x{ord(char):X};" for char in KEY),
        KEY.replace("_", "&lowbar;"),
        json.dumps({"key": KEY}, ensure_ascii=True).replace("k", "\\u006B"),
        KEY[:10] + "\\u" + f"{ord(KEY[10]):04x}" + KEY[11:],  # one escape
    ],
)
def test_mixed_and_partial_encodings_are_replaced(
    redactor: Redactor, copy: str
) -> None:
    assert leaks(redactor.text(copy), KEY) == []
    assert MARKER in redactor.text(copy)


def test_the_marker_tells_neither_length_nor_part() -> None:
    short = Redactor([("api_key", "sk-abcdefgh")]).text("sk-abcdefgh")
    long = Redactor([("api_key", "sk-" + "x1" * 60)]).text("sk-" + "x1" * 60)

    assert short == long == MARKER


def test_a_short_secret_is_replaced_only_as_it_is() -> None:
    secret = "pin42"
    assert len(secret) < MIN_ENCODED_CHARS
    redactor = Redactor([("pin", secret)])

    assert redactor.text("code pin42 sent") == "code [redacted secret pin] sent"
    assert redactor.text("p i n 4 2") == "p i n 4 2"  # too common to match


def test_ordinary_text_is_left_as_it_was(redactor: Redactor) -> None:
    text = (
        'The answer: {"sk": "proj", "url": "https://x.org/a%20b?c=1&amp;d"}, '
        "s k - p r o j and \\u0073\\u006b, QmVhcmVy, 736b2d70726f6a."
    )

    assert redactor.text(text) is text


def test_a_json_value_is_redacted_in_its_strings_and_keys(
    redactor: Redactor,
) -> None:
    value = {
        "content": None,
        "tool_calls": [{"arguments": json.dumps({"q": KEY}), "id": 3}],
        KEY[::-1]: [1.5, True, {"deep": f"x {KEY} y"}],
    }

    clean = redactor.value(value)

    assert leaks(json.dumps(clean), KEY) == []
    assert clean["content"] is None
    assert clean["tool_calls"][0]["id"] == 3
    assert clean[MARKER] == [1.5, True, {"deep": f"x {MARKER} y"}]


def test_a_clean_value_is_returned_as_it_is(redactor: Redactor) -> None:
    value = {"content": "fine", "calls": [{"id": 1}]}

    assert redactor.value(value) is value


def test_a_numeric_secret_echoed_as_a_number_is_replaced() -> None:
    redactor = Redactor([("pin", "4929120013371337")])

    assert redactor.value({"n": 4929120013371337, "m": 7}) == {
        "n": "[redacted secret pin]",
        "m": 7,
    }


def test_a_long_secret_is_replaced_whole_in_every_form() -> None:
    secret = "".join(f"{n:04d}-pem-line-" for n in range(70))  # 980 characters
    assert PIECE_CHARS < len(secret) <= MAX_CHARACTER_FORMS
    redactor = Redactor([("cert", secret)])

    for form in FORMS:
        clean = redactor.text(f"<{echoed(secret, form)}>")
        assert leaks(clean, secret) == [], form
        # One marker, and nothing of the secret around it.
        assert clean in (
            "<[redacted secret cert]>",
            "<QmVhcmVyI[redacted secret cert]>",  # "Bearer " before the secret
        ), form


@pytest.mark.parametrize("form", ["exact", "reversed", "base64", "base64url", "hex"])
def test_a_key_file_is_replaced_as_it_is_reversed_and_in_base64_and_hex(
    form: str,
) -> None:
    secret = "".join(f"{n:05d}:key-file-line\n" for n in range(200))
    assert len(secret) > MAX_CHARACTER_FORMS
    redactor = Redactor([("cert", secret)])

    clean = redactor.text(f"<{echoed(secret, form)}>")

    assert leaks(clean, secret) == []
    assert "[redacted secret cert]" in clean


def test_every_secret_of_the_run_is_replaced_with_its_name(
    redactor: Redactor,
) -> None:
    both = Redactor([("api_key", KEY), ("auth", "agent-token-0123456789")])

    clean = both.text(f"{KEY} and {echoed('agent-token-0123456789', 'hex')}")

    assert clean == f"{MARKER} and [redacted secret auth]"


async def test_a_large_value_is_redacted_the_same_off_the_loop(
    redactor: Redactor,
) -> None:
    big = {"body": "lorem ipsum " * 100_000 + KEY, "parts": ["x"] * 5_000}

    clean = await redactor.redacted(big)

    assert clean["body"].endswith(MARKER)
    assert clean["parts"] == big["parts"]


def test_a_key_hidden_in_noise_of_its_own_characters_is_found(
    redactor: Redactor,
) -> None:
    """Noise made of the key's characters, separators and escapes keeps many
    partial matches alive at once; the copy inside is found all the same."""
    draw = random.Random(5)
    alphabet = sorted(set(KEY)) + list(" -._%&#;\\u<>/=+")
    for number in range(40):
        noise = "".join(draw.choice(alphabet) for _ in range(draw.randint(50, 5_000)))
        form = sorted(FORMS)[number % len(FORMS)]
        at = draw.randint(0, len(noise))
        text = f"{noise[:at]} {echoed(KEY, form)} {noise[at:]}"

        assert leaks(redactor.text(text), KEY) == [], form


@pytest.mark.parametrize("form", sorted(FORMS))
@pytest.mark.parametrize("kept", [9, 16, len(KEY) - 1])
@pytest.mark.parametrize("after", ["", "…", "..."])
def test_a_copy_cut_at_the_end_of_a_text_is_replaced(
    redactor: Redactor, form: str, kept: int, after: str
) -> None:
    # A text cut to its stored length may end inside a copy of the key: here
    # after as many characters of the copy as encode the key's first ``kept``.
    cut = echoed(KEY, form)[: len(echoed(KEY[:kept], form).rstrip("="))]
    text = f"HTTP 401: not accepted: {cut}{after}"

    clean = redactor.text(text)

    assert clean.startswith("HTTP 401: not accepted: "), clean
    # (A copy that a whole form's match took, to its last character, keeps
    # the ellipsis after its marker.)
    assert clean.removesuffix(after).endswith(MARKER), clean
    assert cut[-8:] not in clean


def test_four_characters_of_a_key_at_a_text_s_end_are_replaced(
    redactor: Redactor,
) -> None:
    assert redactor.text(f"key: {KEY[:4]}") == f"key: {MARKER}"


def test_a_cut_copy_is_replaced_in_a_value_s_strings(redactor: Redactor) -> None:
    value = {"raw_body": '{"error": "' + KEY[:12], "number": 1}

    assert redactor.value(value) == {"raw_body": '{"error": "' + MARKER, "number": 1}


def test_only_a_text_s_end_is_taken_for_a_cut_copy(redactor: Redactor) -> None:
    # The key's first characters inside a text are no copy of it, and fewer
    # than four at the end tell too little to be replaced.
    text = f"{KEY[:10]} and more, then {KEY[:3]}"

    assert redactor.text(text) == text
