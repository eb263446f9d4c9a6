"""How the fake model server puts an answer on the wire, and the markers that
make it put one there badly: in chunks, cut short, or too large.

The client under test must read a chunked answer as a whole one, fail (and
not reuse the connection) when the server closes in the middle of an answer,
and refuse an answer over its size limit.
"""

from __future__ import annotations

REASONS = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    404: "Not Found",
    408: "Request Timeout",
    422: "Unprocessable Entity",
    425: "Too Early",
    429: "Too Many Requests",
    500: "Internal Server Error",
    502: "Bad Gateway",
    503: "Service Unavailable",
    504: "Gateway Timeout",
}
WIRE_MARKERS = {
    "[[chunked]]": "send the answer with chunked transfer encoding, in chunks "
    "of 7 bytes",
    "[[cut]]": "send the answer's head and half its body, then close the connection",
    "[[big:BYTES]]": "answer a 200 whose body is BYTES bytes of JSON",
    "[[close]]": "answer with Connection: close, then close the connection",
}
CHUNK = 7


class Closing(bytes):
    """An answer after which the server closes the connection."""


def wired(response: bytes, markers: dict[str, str]) -> bytes:
    """``response`` (a whole HTTP answer) as the wire markers want it sent."""
    head, _, body = response.partition(b"\r\n\r\n")
    if "big" in markers:
        size = max(int(markers["big"] or 0), 15)
        body = b'{"padding": "' + b"x" * (size - 15) + b'"}'
        head = b"\r\n".join(
            b"Content-Length: %d" % len(body)
            if line.lower().startswith(b"content-length:")
            else line
            for line in head.split(b"\r\n")
        )
    if "chunked" in markers:
        lines = [
            line
            for line in head.split(b"\r\n")
            if not line.lower().startswith(b"content-length:")
        ]
        head = b"\r\n".join([*lines, b"Transfer-Encoding: chunked"])
        chunks = [body[at : at + CHUNK] for at in range(0, len(body), CHUNK)]
        body = b"".join(b"%x\r\n%s\r\n" % (len(c), c) for c in chunks) + b"0\r\n\r\n"
    if "cut" in markers:
        return Closing(head + b"\r\n\r\n" + body[: len(body) // 2])
    if "close" in markers:
        return Closing(head + b"\r\nConnection: close\r\n\r\n" + body)
    return head + b"\r\n\r\n" + body
