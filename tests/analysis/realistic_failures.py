"""Failures as a researcher's first runs give them: HumanEval programs scored
by code_exec, and GSM8K/MATH-style answers scored by math.

The code_exec reasons are made by the sandbox's own ``Outcome`` from what its
harness prints, so they are the reasons a run stores.
"""

from __future__ import annotations

from runs.sandbox.outcome import Limits, Outcome

NAMES = [
    "has_close_elements", "separate_paren_groups", "truncate_number",
    "below_zero", "mean_absolute_deviation", "intersperse", "parse_nested_parens",
    "filter_by_substring", "sum_product", "rolling_max", "make_palindrome",
    "string_xor", "longest", "greatest_common_divisor", "all_prefixes",
    "string_sequence", "count_distinct_characters", "parse_music",
    "how_many_times", "sort_numbers", "find_closest_elements",
    "rescale_to_unit", "filter_integers", "strlen", "largest_divisor",
]  # fmt: skip
ARGUMENTS = [
    "[1.0, 2.0, 3.9, 4.0, 5.0, 2.2], 0.3",
    "'(()()) ((())) () ((())()())'",
    "3.5",
    "[1, 2, -4, 5, 6]",
    "''",
    "[5, 6, 3, 4], 8",
    "'abc', 'xyz'",
    "[[1, 2], [3]]",
    "'three one five'",
    "{'a': 1}",
    "-7, 0.25",
]
RESULTS = ["True", "[]", "'(())'", "0.5", "[1, 2, 3]", "{'x'}", "None", "-3"]
MESSAGES = [
    "",
    ": This prints if this assert fails 1 (good for debugging!)",
    ": This prints if this assert fails 2 (also good for debugging!)",
]


def _traceback(frames: str, exception: str, note: str = "") -> bytes:
    return (f"Traceback (most recent call last):\n{frames}{exception}\n{note}").encode()


def _assertion(n: int) -> Outcome:
    """A wrong answer: an assert of the tests fails (HumanEval's usual failure)."""
    arguments, result = ARGUMENTS[n % len(ARGUMENTS)], RESULTS[n % len(RESULTS)]
    if n % 4 == 3:
        line = f"assert abs(candidate({arguments}) - {result}) < 1e-6"
    elif n % 4 == 2:
        line = f"assert candidate({arguments}) is {result}"
    else:
        line = f"assert candidate({arguments}) == {result}"
    frames = (
        f'  File "<tests>", line {10 + n % 30}, in check\n'
        f"    {line}\n"
        f"           {'^' * (len(line) - 7)}\n"
    )
    message = MESSAGES[n % len(MESSAGES)]
    return Outcome(
        "bubblewrap", 1, output=_traceback(frames, f"AssertionError{message}")
    )


def _raised(n: int, exception: str) -> Outcome:
    """An exception the candidate raised inside a call from the tests."""
    name = NAMES[n % len(NAMES)]
    frames = (
        f'  File "<tests>", line {8 + n % 12}, in check\n'
        f"    assert candidate({ARGUMENTS[n % len(ARGUMENTS)]}) == []\n"
        "           ^^^^^^^^^^^^^^^^^^^^^^\n"
    )
    note = f'raised by the candidate:\n  File "<program>", line {20 + n}, in {name}\n'
    return Outcome("bubblewrap", 1, output=_traceback(frames, exception, note))


def _syntax(n: int) -> Outcome:
    lines = ["```python", "Here is the fixed code:", "    return x +* 1", "def f(:"]
    source = lines[n % len(lines)]
    frames = f'  File "<program>", line {12 + n}\n    {source}\n    ^\n'
    message = ["invalid syntax", "unterminated string literal (detected at line 9)"]
    return Outcome(
        "bubblewrap", 1, output=_traceback(frames, f"SyntaxError: {message[n % 2]}")
    )


def _undefined_at_load(n: int) -> Outcome:
    name = NAMES[n % len(NAMES)]
    frames = (
        f'  File "<program>", line {3 + n}, in <module>\n'
        f"    def {name}(xs: List[int]):\n"
    )
    return Outcome(
        "bubblewrap",
        1,
        output=_traceback(frames, "NameError: name 'List' is not defined"),
    )


def humaneval_failures() -> list[str]:
    """164 failing code_exec reasons: mostly wrong answers, then exceptions of
    the candidate, NameErrors, SyntaxErrors and timeouts."""
    outcomes = [_assertion(n) for n in range(120)]
    outcomes += [
        _raised(n, exception)
        for n, exception in enumerate(
            ["TypeError: 'int' object is not iterable"] * 6
            + ["IndexError: list index out of range"] * 5
            + ["ValueError: invalid literal for int() with base 10: 'a'"] * 4
            + ["ZeroDivisionError: division by zero"] * 3
        )
    ]
    outcomes += [
        _raised(n, f"NameError: name '{NAMES[n]}_helper' is not defined")
        for n in range(6)
    ]
    outcomes += [_undefined_at_load(n) for n in range(3)]
    outcomes += [_syntax(n) for n in range(8)]
    outcomes += [
        Outcome("bubblewrap", timed_out=True, limits=Limits(wall_seconds=10))
        for _ in range(9)
    ]
    assert len(outcomes) == 164
    return [outcome.describe() for outcome in outcomes]


# (model output, expected answer): wrong answers of every shape, and outputs
# without an answer.
MATH_ANSWERS = [
    ("The answer is \\boxed{18}.", "16"),
    ("So she earns \\boxed{\\$72}.", "64"),
    ("\\boxed{\\frac{3}{4}}", "\\frac{2}{3}"),
    ("\\boxed{x^2 + 1}", "x^2 - 1"),
    ("\\boxed{\\sqrt{2}}", "2"),
    ("\\boxed{\\{1, 2\\}}", "\\{1, 3\\}"),
    ("\\boxed{(0, 1]}", "[0, 1)"),
    ("\\boxed{3.75}", "3.5"),
    ("\\boxed{2\\pi}", "\\pi"),
    ("\\boxed{-5}", "5"),
    ("\\boxed{12\\%}", "15\\%"),
    ("\\boxed{y = 2x + 3}", "y = 2x - 3"),
    ("\\boxed{\\frac{\\sqrt{3}}{2}}", "\\frac{1}{2}"),
    ("\\boxed{1,250}", "1,200"),
    ("\\boxed{e^{2}}", "e"),
    ("\\boxed{10^{3}}", "100"),
    ("\\boxed{\\log_2 8}", "2"),
    ("\\boxed{0.333}", "\\frac{1}{3}"),
    ("\\boxed{a+b}", "a-b"),
    ("\\boxed{(2, -1)}", "(1, 2)"),
    ("\\boxed{7}", "\\text{seven}"),
    ("\\boxed{\\dfrac{7}{8}}", "\\frac{5}{8}"),
    ("\\boxed{4\\sqrt{5}}", "2\\sqrt{5}"),
    ("\\boxed{36^\\circ}", "72"),
    ("\\boxed{2^{10}}", "1000"),
    ("\\boxed{n(n+1)/2}", "n^2"),
    ("\\boxed{\\infty}", "0"),
    ("Final answer: 42", "24"),
    ("#### 105", "150"),
    ("Therefore, the total is 3 apples and 9 pears, \\boxed{12}.", "11"),
    ("\\boxed{1.5 \\times 10^{3}}", "1500.5"),
    ("\\boxed{[2, 5]}", "[2, 6]"),
    ("I cannot solve this.", "16"),
    ("", "\\frac{1}{2}"),
    ("Let me think step by step.", "x^2"),
    ("The question is unclear.", "7"),
    ("\\boxed{9}", "3^3"),
    ("\\boxed{0}", "-1"),
    ("\\boxed{2,3}", "\\{2, 4\\}"),
    ("\\boxed{\\frac{9}{2}}", "4"),
]
