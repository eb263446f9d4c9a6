"""What a plain evalrun imports: nothing it does not use."""

from __future__ import annotations

import re
import sys

from tests.test_evalrun_command import run_cli, write_items

# What serves pages and the API, and libraries a plain run (exact_match over a
# JSONL file, no --baseline) has no use for: each was imported by every
# evalrun, through the app's set-up, the command's own imports or the run's end.
NOT_IMPORTED = re.compile(
    r"ninja(\..*)?"  # the API, through the app registry
    r"|runs\.(web|api|admin|urls)(\..*)?"
    r"|runs\.\w+\.(views|forms|api|urls|templatetags)"
    r"|django\.contrib\.admin\.views\.main"
    r"|runs\.management\.(gate|gate_reports)"  # only with --baseline
    r"|runs\.(evaluations|alerts)\.services"  # only when a run of an evaluation ends
    # Only with --retry and --resume, and the clusters their selectors use:
    r"|runs\.retry(\..*)?|runs\.results\.selectors|runs\.analysis\.cluster_members"
    # A scorer's module, but the one the run uses (and what it uses):
    r"|runs\.scorers\.(?!exact_match$|text$)\w+"
    # Only by the scorers, files and secrets that use them:
    r"|(scipy|rapidfuzz|pebble|yaml|cryptography)(\..*)?"
)


# manage.py run as a script, then every module the process holds listed
# (-X importtime would miss those imported through importlib.import_module).
LIST_MODULES = """
import runpy, sys
sys.argv = sys.argv[1:]
try:
    runpy.run_path("manage.py", run_name="__main__")
finally:
    sys.stderr.write("\\n".join(["modules:", *sorted(sys.modules)]) + "\\n")
"""


def imported_by_evalrun(data_dir, tmp_path) -> set[str]:
    dataset = write_items(tmp_path / "items.jsonl", 2)
    done = run_cli(
        [
            *(sys.executable, "-c", LIST_MODULES, "manage.py", "evalrun"),
            *(str(dataset), "--target", "demo", "--scorer", "exact_match", "--json"),
        ],
        data_dir,
    )
    assert done.returncode == 0, done.stderr
    assert "modules:" in done.stderr, done.stderr
    return set(done.stderr.split("modules:\n", 1)[1].split())


def test_a_plain_run_never_imports_scipy_stats(data_dir, tmp_path):
    imported = imported_by_evalrun(data_dir, tmp_path)

    assert "django.db.models" in imported  # the list is read
    assert "scipy.stats" not in imported


def test_a_plain_run_imports_no_web_layer_nor_unused_libraries(data_dir, tmp_path):
    imported = imported_by_evalrun(data_dir, tmp_path)

    assert "runs.executor.engine" in imported  # the list is read
    assert "runs.scorers.exact_match" in imported
    assert sorted(name for name in imported if NOT_IMPORTED.fullmatch(name)) == []


def test_status_offers_the_retry_statuses_without_importing_them_early():
    from runs.management.commands.evalrun import Command
    from runs.retry.services import RETRY_STATUSES

    parser = Command().create_parser("manage.py", "evalrun")

    assert ", ".join(RETRY_STATUSES) in " ".join(parser.format_help().split())
    status = next(a for a in parser._actions if a.dest == "status")
    assert list(status.choices) == list(RETRY_STATUSES)
    assert "skipped" in status.choices and "done" not in status.choices


def test_a_deferred_kind_is_imported_when_looked_up_not_when_listed(
    tmp_path, monkeypatch
):
    from runs.plugins.registry import Registry

    (tmp_path / "deferred_plugin.py").write_text(
        "from tests.test_evalrun_startup import REGISTRY\n"
        "@REGISTRY.register\n"
        "class Late:\n"
        "    kind = 'late'\n"
        "    label = example = clean = secrets = Params = None\n"
        "    def score(self): ...\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    registry = Registry("thing", object, "score")  # the module registers with it
    monkeypatch.setattr(sys.modules[__name__], "REGISTRY", registry, raising=False)
    registry.defer("late", "deferred_plugin")
    monkeypatch.delitem(sys.modules, "deferred_plugin", raising=False)

    assert registry.kinds() == ["late"]
    assert "deferred_plugin" not in sys.modules
    assert registry["late"].kind == "late"
    assert "deferred_plugin" in sys.modules and registry.deferred == {}
    assert dict(registry) == {"late": registry["late"]}
