"""The Daphne and Twisted internals that evalsite/bodylimit.py relies on are the
ones it was tested against.

Under Daphne, a body limit needs hooks that neither Daphne nor Twisted offers
publicly (see the module's docstring), so ``install_under_daphne`` wraps a few
of their methods and reads a few private attributes, and pyproject.toml pins
both packages. Each function below is compared, by the hash of its source,
with the version the patch was written for: a failure names what changed and
what to check in the patch before updating the hash.
"""

from __future__ import annotations

import ast
import hashlib
import importlib
import importlib.metadata
import inspect
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# The versions pinned in pyproject.toml, which the hashes below belong to.
TESTED = {"daphne": "4.2.3", "twisted": "26.10.0"}

# (module, qualified name): (source hash, what the patch relies on).
INTERNALS: dict[tuple[str, str], tuple[str, str]] = {
    ("twisted.web.http", "Request.__init__"): (
        "e7d2eb8df8c5294bc2bde8c74e9cc690640d323270463d30a0e5e83a58b65541",
        "sets _parsePOSTFormSubmission, which gotLength turns off",
    ),
    ("twisted.web.http", "Request.gotLength"): (
        "0fa22c17856a221cbfe580a3ae5794859f36072e71b3316a286c0b1254466360",
        "only makes self.content; wrapped to refuse by Content-Length",
    ),
    ("twisted.web.http", "Request.handleContentChunk"): (
        "7231aa98dddfd6b04e6c417f3e3ed04751e27895283b3adf9292e926ae210031",
        "only writes to self.content; wrapped to count and hold chunks",
    ),
    ("twisted.web.http", "Request.requestReceived"): (
        "ef516c4a44258acb38f38eea4be5eec559c9f806afcfedcbb7371214e8ccc86f",
        "parses form bodies only if _parsePOSTFormSubmission, then calls process",
    ),
    ("twisted.web.http", "Request.connectionLost"): (
        "26380ffd6b7c2f51146c8b48b7e2917dd88dd70d4486aa0065b968f25d1d1e13",
        "sets _disconnected, read once the credentials are checked",
    ),
    ("twisted.web.http", "_getContentFile"): (
        "4c6cee02eac8b7094bdcd04faff1df45f9da9d8a679bbce2c2f33a26c3e60127",
        "BytesIO for small bodies (read on the event loop), a file otherwise",
    ),
    ("twisted.web.http", "HTTPChannel.__init__"): (
        "def277f0adccffffcdc31e1676873d83014f901295a1ff85d556b7bff66df70e",
        "sets _handlingRequest, checked before resuming",
    ),
    ("twisted.web.http", "HTTPChannel.allContentReceived"): (
        "dd65e80af12385fe2441bcb96dee5782231cf52da4392c6d523593bcd6eb7e6c",
        "sets _handlingRequest before requestReceived",
    ),
    ("twisted.web.http", "HTTPChannel.connectionMade"): (
        "ccd66d383ede3e42f867a33da8cf67afe80883fee8aa93cc2c0c1c837b1675e8",
        "sets _networkProducer, paused while the credentials are checked",
    ),
    ("twisted.web.http", "HTTPChannel.lineReceived"): (
        "5b8cd4398d69cbd48e14600d3e607ef32533d32a8ff6a4c3ce16dd22902e2606",
        "sets _path (the 413's format) before the headers end",
    ),
    ("twisted.web.http", "HTTPChannel._maybeChooseTransferDecoder"): (
        "fc8f077b5ea53fcaa67d8e905c71e6f323dfacf898c4ff4d3e394afcf527bec1",
        "both decoders feed the request's handleContentChunk",
    ),
    ("twisted.web.http", "HTTPChannel.allHeadersReceived"): (
        "0a8dfaba39cbefb18b7277924cbb34ae5710924d68ba70d9eb54d66716b5e057",
        "calls gotLength before reading Expect (removed from a refused request)",
    ),
    ("twisted.web.http", "HTTPChannel.rawDataReceived"): (
        "dc51790a68bc00b70fbd867abc5c1095d9c5d2f6288d8039602f064fa5da4eda",
        "reached through self.rawDataReceived, which a refusal replaces",
    ),
    ("twisted.web.http", "HTTPChannel.requestDone"): (
        "1ea5e0193ce1a1a83358361ed2225028aa1090aa68b951965e82048c3c7272bd",
        "resumes reading unless _waitingForTransport",
    ),
    ("twisted.web.http", "HTTPChannel.pauseProducing"): (
        "01bbe2908cd2b12e4a1b8e30494346f88c36c656a27b1ec6101ab512957d6624",
        "sets _waitingForTransport, checked before resuming",
    ),
    ("twisted.web.http", "HTTPChannel.resumeProducing"): (
        "ca0a4109a3ef7c467e234301a011be9a9cc9c209af8e313969869c065d7fe87d",
        "clears _waitingForTransport and resumes only when not _handlingRequest",
    ),
    ("daphne.http_protocol", "WebRequest.process"): (
        "b22deb6530a582732e8118701d6cd02cfc1236e364f6a02d0af39199992b1897",
        "seeks self.content to 0, calls create_application, then reads self.content "
        "into one message at least (the placeholder the application drops)",
    ),
    ("daphne.http_protocol", "WebRequest.connectionLost"): (
        "517358708bb0a4cd7b0c616aa6546372eb7cd286770af123faf0ecc0da1ad3b4",
        "queues http.disconnect once the application runs",
    ),
    ("daphne.http_protocol", "HTTPFactory.buildProtocol"): (
        "ee79354dea2bd5e67dd2be188538f2580d16a8bb5c81bf3cc1fd4de76a93c3e1",
        "builds requests from WebRequest, the class whose methods are wrapped",
    ),
    ("daphne.server", "Server.create_application"): (
        "e440a9663047ea8568dbb2e68ec6dae0a110d4f82e70a16712e84d7acccbeffa",
        "wrapped to hand the body file over in the scope",
    ),
}

# Private attributes read or written that a class defines (the rest are set by
# the methods above).
CLASS_ATTRIBUTES = [
    ("twisted.web.http", "Request", "_disconnected"),
    ("twisted.web.http", "HTTPChannel", "_waitingForTransport"),
]


def source_of(module_name: str, qualname: str) -> str:
    """The source of a function as its module defines it, even once wrapped."""
    module = importlib.import_module(module_name)
    tree = ast.parse(source := inspect.getsource(module))
    nodes: list[ast.stmt] = tree.body
    found: ast.stmt | None = None
    for part in qualname.split("."):
        found = next(
            (
                node
                for node in nodes
                if isinstance(node, ast.ClassDef | ast.FunctionDef)
                and node.name == part
            ),
            None,
        )
        assert found is not None, f"{module_name} no longer defines {qualname}"
        nodes = getattr(found, "body", [])
    segment = ast.get_source_segment(source, found)
    assert segment is not None
    return segment


@pytest.mark.parametrize("package", sorted(TESTED))
def test_installed_version_is_the_tested_one(package: str) -> None:
    pinned = re.search(
        rf'"{package}==([^"]+)"', (ROOT / "pyproject.toml").read_text(), re.I
    )

    assert pinned is not None, f"pyproject.toml must pin {package} exactly"
    assert pinned.group(1) == TESTED[package]
    assert importlib.metadata.version(package) == TESTED[package], (
        f"{package} {importlib.metadata.version(package)} is installed; "
        f"evalsite/bodylimit.py was tested with {TESTED[package]}"
    )


@pytest.mark.parametrize(
    ("module_name", "qualname"), sorted(INTERNALS), ids=lambda v: v
)
def test_patched_internals_are_unchanged(module_name: str, qualname: str) -> None:
    expected, relied_on = INTERNALS[module_name, qualname]
    digest = hashlib.sha256(source_of(module_name, qualname).encode()).hexdigest()

    assert digest == expected, (
        f"{module_name}.{qualname} changed. evalsite/bodylimit.py relies on "
        f"this: {relied_on}. Check install_under_daphne against the new code, "
        f"run tests/test_http_body_limit.py, then set its hash to {digest}."
    )


@pytest.mark.parametrize(("module_name", "owner", "name"), CLASS_ATTRIBUTES)
def test_private_class_attributes_exist(
    module_name: str, owner: str, name: str
) -> None:
    cls = getattr(importlib.import_module(module_name), owner)

    assert name in vars(cls), (
        f"{module_name}.{owner}.{name} is gone: evalsite/bodylimit.py reads it"
    )


def test_daphne_request_overrides_none_of_the_wrapped_methods() -> None:
    # The wrappers call Twisted's methods: an override in Daphne's own class
    # would be skipped by a wrapper installed before it, or wrap a wrapper.
    tree = ast.parse(inspect.getsource(importlib.import_module("daphne.http_protocol")))
    web_request = next(
        node
        for node in tree.body
        if isinstance(node, ast.ClassDef) and node.name == "WebRequest"
    )
    defined = {
        node.name for node in web_request.body if isinstance(node, ast.FunctionDef)
    }

    assert not defined & {"gotLength", "handleContentChunk", "requestReceived"}


def test_twisted_serves_no_http2() -> None:
    # Over HTTP/2 Twisted feeds requests from an H2Stream, which has none of
    # the HTTPChannel attributes the wrappers use (and a 413 written as
    # HTTP/1.1 bytes would corrupt the connection).
    from twisted.web import http

    assert not http.H2_ENABLED, (
        "Twisted can now negotiate HTTP/2 (the h2 package is installed): "
        "install_under_daphne handles HTTP/1.1 connections only"
    )
