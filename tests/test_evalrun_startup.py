"""What a plain evalrun imports: nothing it does not use."""

from __future__ import annotations

import json
import re
import socket
import sys

import pytest

from tests.test_evalrun_command import count_results, run_cli, write_items

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
    # An agent's tools, by the run of an agent that calls them (runs/tools/):
    r"|runs\.tools\.\w+|runs\.sandbox(\..*)?"
    # httpx's command-line client and what it brings (evalsite/lean_imports.py);
    # rich draws the progress bar on a terminal only:
    r"|httpx\._main|(click|rich|pygments)(\..*)?"
)


# manage.py run as a script, then every module the process holds listed
# (-X importtime would miss those imported through importlib.import_module),
# as the command ends the process (os._exit) or, failing, as the script ends.
LIST_MODULES = """
import os, runpy, sys
sys.argv = sys.argv[1:]
end = os._exit

def listed():
    names = sorted(name for name, module in sys.modules.items() if module is not None)
    sys.stderr.write("\\n".join(["modules:", *names]) + "\\n")
    sys.stderr.flush()

def listed_end(code):
    listed()
    end(code)

os._exit = listed_end
try:
    runpy.run_path("manage.py", run_name="__main__")
finally:
    listed()
"""


def imported_by_evalrun(data_dir, tmp_path, *target: str) -> set[str]:
    """The modules of a plain evalrun of the demo target (or ``target``'s
    arguments), once its run of two items has succeeded."""
    dataset = write_items(tmp_path / "items.jsonl", 2)
    done = run_cli(
        [
            *(sys.executable, "-c", LIST_MODULES, "manage.py", "evalrun"),
            *(str(dataset), *(target or ("--target", "demo"))),
            *("--scorer", "exact_match", "--json"),
        ],
        data_dir,
    )
    assert done.returncode == 0, done.stderr
    assert "modules:" in done.stderr, done.stderr
    summary = json.loads(done.stdout)
    assert (summary["status"], summary["succeeded"]) == ("completed", 2), summary
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


def test_a_plain_run_never_imports_aiohttp(data_dir, tmp_path):
    """Its calls go through the keep-alive pool (runs/calls/keepalive.py):
    aiohttp, whose import makes two TLS contexts from the system's
    certificates, serves only the tools' and alerts' sessions."""
    imported = imported_by_evalrun(data_dir, tmp_path)

    assert "runs.calls.netpolicy" in imported  # the list is read
    assert sorted(n for n in imported if n.split(".")[0] == "aiohttp") == []


def test_a_run_that_calls_a_named_host_never_imports_aiohttp(
    data_dir, fake_openai, tmp_path
):
    # "localhost" is resolved, and its addresses checked, on connecting.
    base_url = fake_openai.base_url.replace("127.0.0.1", "localhost")
    imported = imported_by_evalrun(
        data_dir,
        tmp_path,
        *("--target", "openai_chat", "--base-url", base_url, "--model", "fake"),
    )

    assert "runs.calls.keepalive" in imported  # the list is read
    assert fake_openai.stats.requests == 2
    assert sorted(n for n in imported if n.split(".")[0] == "aiohttp") == []
    assert "runs.calls.sessions" not in imported


def test_the_calls_user_agent_is_aiohttps_without_importing_it():
    from aiohttp.http import SERVER_SOFTWARE

    from runs.calls.keepalive import header_lines

    assert f"User-Agent: {SERVER_SOFTWARE}\r\n".encode() in header_lines(())


async def test_the_resolver_answers_as_aiohttps_threaded_resolver():
    from aiohttp.resolver import ThreadedResolver as AiohttpResolver

    from runs.calls.netpolicy import ThreadedResolver

    for family in (socket.AF_UNSPEC, socket.AF_INET):
        ours = await ThreadedResolver().resolve("localhost", 8000, family)
        theirs = await AiohttpResolver().resolve("localhost", 8000, family)
        assert ours == theirs and ours


async def test_a_sessions_refusal_is_one_of_aiohttps_client_errors():
    """Tools and alerts catch aiohttp's client errors: a refusal is one."""
    import aiohttp

    from runs.calls.netpolicy import NetworkPolicy, PolicyRefused
    from runs.calls.sessions import policy_session

    async with policy_session(NetworkPolicy.parse(["public"], [])) as session:
        for url in ("http://127.0.0.1:9/", "http://localhost:9/"):
            with pytest.raises(aiohttp.ClientConnectionError) as caught:
                await session.get(url)
            assert isinstance(caught.value, PolicyRefused)
            assert str(caught.value).startswith(
                "the network policy refuses connections to "
            )


# What the interpreter's teardown would print: the command ends the process
# without it, once the run is stored and the summary printed.
AT_TEARDOWN = """
import atexit, runpy, sys
sys.argv = sys.argv[1:]
atexit.register(lambda: sys.stderr.write("interpreter teardown\\n"))
runpy.run_path("manage.py", run_name="__main__")
"""


def evalrun_at_teardown(data_dir, *args: str):
    return run_cli(
        [sys.executable, "-c", AT_TEARDOWN, "manage.py", "evalrun", *args], data_dir
    )


def test_evalrun_ends_its_process_once_the_run_is_stored_and_printed(
    data_dir, tmp_path
):
    dataset = write_items(tmp_path / "items.jsonl", 2)
    done = evalrun_at_teardown(
        data_dir, str(dataset), "--target", "demo", "--scorer", "exact_match", "--json"
    )

    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert (summary["status"], summary["total"]) == ("completed", 2)
    assert count_results(data_dir, summary["run_id"]) == 2
    assert "interpreter teardown" not in done.stderr


def test_evalrun_ended_at_once_keeps_the_exit_code_and_message_of_bad_input(
    data_dir, tmp_path
):
    missing = tmp_path / "missing.jsonl"
    done = evalrun_at_teardown(data_dir, str(missing), "--scorer", "exact_match")

    assert done.returncode == 2
    assert f"{missing}: no such file" in done.stderr
    assert "interpreter teardown" not in done.stderr


def test_a_profiled_evalrun_still_ends_through_the_teardown_that_writes_the_profile(
    data_dir, tmp_path
):
    dataset = write_items(tmp_path / "items.jsonl", 2)
    profile = tmp_path / "evalrun.prof"
    done = run_cli(
        [
            *(sys.executable, "-m", "cProfile", "-o", str(profile), "manage.py"),
            *("evalrun", str(dataset), "--target", "demo", "--scorer", "exact_match"),
        ],
        data_dir,
    )

    assert done.returncode == 0, done.stderr
    assert profile.stat().st_size > 0


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
