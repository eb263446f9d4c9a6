"""Dataset files read for a preview: the reader's peak memory and time, per format.

Each case writes one file and previews it (as the upload page and the
preview endpoint do) in a child process of its own, then reports what the
child answered, how long the preview took (wall and CPU time), and the
child's peak resident memory (``VmHWM``, which starts afresh at exec, unlike
``ru_maxrss``) above that of a child that previews a one-line file.

    .venv/bin/python bench/import_memory.py                  # every case, 20 MB
    .venv/bin/python bench/import_memory.py json-zeros json-objects --mb 5
    .venv/bin/python bench/import_memory.py --code /path/to/other/checkout

``--code`` runs the preview from another checkout (with this virtual
environment), to compare before and after a change. Linux only (it reads
/proc). ``--env NAME=VALUE`` sets a setting for the children,
e.g. ``--env EVALSITE_MAX_YAML_BYTES=104857600`` to measure a larger YAML file.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
MB = 1024 * 1024

PREVIEW = """
import json, os, sys, time
sys.path.insert(0, {code!r})
os.environ["DJANGO_SETTINGS_MODULE"] = "evalsite.settings"
import django
django.setup()
from pathlib import Path
from runs.datasets.importers import Source, preview_file
started, cpu = time.perf_counter(), time.process_time()
try:
    found = preview_file(source=Source.from_path(Path({path!r})))
    outcome = f"{{found.count:,}} records"
except Exception as exc:
    outcome = f"{{type(exc).__name__}}: {{str(exc)[:160]}}"
seconds = time.perf_counter() - started
cpu_seconds = time.process_time() - cpu
status = Path("/proc/self/status").read_text()
peak = next(line for line in status.splitlines() if line.startswith("VmHWM:"))
peak_kib = int(peak.split()[1])
report = {{"outcome": outcome, "seconds": seconds, "cpu_seconds": cpu_seconds}}
print(json.dumps({{**report, "peak_kib": peak_kib}}))
"""


def _record(number: int) -> bytes:
    return json.dumps(
        {"id": number, "input": f"question {number} " + "x" * 60, "expected": "42"}
    ).encode()


def _json_zeros(size: int) -> bytes:
    return b"[" + b",".join([b"0"] * (size // 2)) + b"]"


def _records(size: int) -> list[bytes]:
    count = size // len(_record(10**6))
    return [_record(number) for number in range(count)]


def _json_objects(size: int) -> bytes:
    return b"[" + b",\n".join(_records(size)) + b"]"


def _json_one_line(size: int) -> bytes:
    return b"[" + b", ".join(_records(size)) + b"]"


def _jsonl(size: int) -> bytes:
    return b"\n".join(_records(size)) + b"\n"


def _yaml(size: int) -> bytes:
    item = b'- id: %d\n  input: "question %d xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"\n'
    line = item % (10**6, 10**6)
    return b"".join(item % (n, n) for n in range(size // len(line)))


CASES: dict[str, tuple[str, Callable[[int], bytes]]] = {
    "json-zeros": ("x.json", _json_zeros),
    "json-objects": ("x.json", _json_objects),
    "json-one-line": ("x.json", _json_one_line),
    "jsonl": ("x.jsonl", _jsonl),
    "yaml": ("x.yaml", _yaml),
}


def _preview(
    code: Path, path: Path, data_dir: Path, env: dict[str, str]
) -> dict[str, Any]:
    child_env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("DATABASE_URL", "REDIS_URL", "DJANGO_SETTINGS_MODULE")
    }
    child_env |= {"EVALSITE_DATA_DIR": str(data_dir), **env}
    with tempfile.TemporaryFile("w+") as out:
        child = subprocess.Popen(
            [sys.executable, "-c", PREVIEW.format(code=str(code), path=str(path))],
            cwd=code,
            env=child_env,
            stdout=out,
            stderr=subprocess.STDOUT,
            text=True,
        )
        child.wait()
        out.seek(0)
        text = out.read()
    try:
        report = json.loads(text.strip().splitlines()[-1])
    except (ValueError, IndexError):  # the child died before reporting
        report = {"outcome": text[-300:]}
    report["peak_rss_mib"] = round(report.pop("peak_kib", 0) / 1024, 1)
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("cases", nargs="*", help=", ".join(CASES))
    parser.add_argument("--mb", type=float, default=20, help="file size in MiB")
    parser.add_argument("--code", type=Path, default=ROOT, help="checkout to run")
    parser.add_argument("--env", action="append", default=[], metavar="NAME=VALUE")
    args = parser.parse_args(argv)
    cases = args.cases or list(CASES)
    if unknown := set(cases) - set(CASES):
        parser.error(f"unknown case {sorted(unknown)}; choose from {list(CASES)}")
    env = dict(item.split("=", 1) for item in args.env)
    results: dict[str, Any] = {"code": str(args.code), "mib": args.mb}
    with tempfile.TemporaryDirectory(prefix="evalsite-bench-") as tmp:
        data_dir = Path(tmp)
        code = args.code.resolve()
        tiny = data_dir / "tiny.jsonl"
        tiny.write_bytes(_record(1) + b"\n")
        results["baseline"] = _preview(code, tiny, data_dir, env)
        for name in cases:
            filename, make = CASES[name]
            path = data_dir / filename
            path.write_bytes(make(int(args.mb * MB)))
            report = _preview(code, path, data_dir, env)
            report["bytes"] = path.stat().st_size
            report["extra_peak_rss_mib"] = round(
                report["peak_rss_mib"] - results["baseline"]["peak_rss_mib"], 1
            )
            results[name] = report
            path.unlink()
    print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
