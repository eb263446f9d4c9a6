"""The fake OpenAI server's judge: its verdict on a prompt that asks to grade."""

from __future__ import annotations

import json
import re
from typing import Any

# A request whose messages ask to grade is answered as a judge (judge_reply).
GRADING = re.compile(r"\bgrad(?:e|er|ing)\b", re.IGNORECASE)
_SECTION = r"^{label}:[ \t]*\n?(.*?)(?=\n[ \t]*\n|\Z)"
_ANSWER = re.compile(_SECTION.format(label="Answer"), re.MULTILINE | re.DOTALL)
_REFERENCE = re.compile(
    _SECTION.format(label="Reference(?: answer)?"),
    re.MULTILINE | re.DOTALL | re.IGNORECASE,
)
_JSON_VERDICT_KEY = re.compile(r'"(\w+)":\s*"pass" or "fail"')
_JSON_SCORE_KEY = re.compile(r'"(\w+)":\s*a number')


def _normal(text: str) -> str:
    return " ".join(text.split()).rstrip(".").casefold()


def judge_reply(prompt: str) -> str:
    """What the fake judge answers to a grading prompt (markers removed).

    The convention: the answer is the text after a line ``Answer:`` up to a
    blank line, the reference the text after ``Reference answer:`` (or
    ``Reference:``) likewise. The answer passes when it equals the reference,
    ignoring case, surrounding whitespace and a final full stop; without a
    reference, when it is not empty. The reply is a reasoning line and the
    verdict in the form the prompt asks for: a JSON object (when the prompt
    says JSON, with the keys it names for "pass" or "fail" and for a
    number), "Score: 5" or "Score: 1" (when it asks for 1 to 5), "Score: 10"
    or "Score: 0" (0 to 10), otherwise "Verdict: PASS" or "Verdict: FAIL".
    """
    answers = _ANSWER.findall(prompt)
    references = _REFERENCE.findall(prompt)
    answer = answers[-1].strip() if answers else ""
    if references:
        passed = _normal(answer) == _normal(references[-1])
        why = (
            "The answer matches the reference."
            if passed
            else f"The answer {answer[:80]!r} does not match the reference "
            f"{references[-1].strip()[:80]!r}."
        )
    else:
        passed = bool(answer)
        why = "The answer is there." if passed else "There is no answer."
    if "JSON" in prompt:
        verdict_key = _JSON_VERDICT_KEY.search(prompt)
        score_key = _JSON_SCORE_KEY.search(prompt)
        reply: dict[str, Any] = {"reasoning": why}
        if verdict_key:
            reply[verdict_key.group(1)] = "pass" if passed else "fail"
        if score_key:
            reply[score_key.group(1)] = 1 if passed else 0
        return json.dumps(reply)
    if "1 to 5" in prompt:
        return f"{why}\nScore: {5 if passed else 1}"
    if "0 to 10" in prompt:
        return f"{why}\nScore: {10 if passed else 0}"
    return f"{why}\nVerdict: {'PASS' if passed else 'FAIL'}"
