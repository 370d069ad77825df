#!/usr/bin/env python3
"""Hydra integration-test HTTP server (Python 3.11, standard library only).

Usage
-----
    python3 Tests/Support/testserver.py [--port N] [--ignore-stdin]

The server binds 127.0.0.1 on port N (default 0: the OS picks a free port).
As soon as the socket is listening it prints exactly ``PORT <n>`` followed by
a newline to stdout and flushes, so the test harness can read the port.

It serves until it is killed or until its stdin reaches EOF.  A daemon thread
watches stdin and calls ``os._exit(0)`` on EOF, so a crashed test runner (whose
end of the stdin pipe closes when it dies) never leaves the server orphaned.
The Swift side must therefore give the subprocess a *pipe* as stdin and keep
its write end open for as long as the server is needed.  ``--ignore-stdin``
disables the watcher (handy for running the server by hand in the background,
where stdin is often /dev/null).

The server speaks HTTP/1.1 with keep-alive, one thread per connection
(``ThreadingHTTPServer``, daemon threads, listen backlog 1024).  Every response
carries Content-Length, except ``/chunked``, which exists to test chunked
transfer encoding.  Every JSON response has ``Content-Type: application/json``.
HEAD is accepted everywhere and sends the headers a GET would, without a body.
Request bodies are read in full (Content-Length or chunked) before answering.

Endpoints (methods GET/POST/PUT/PATCH/DELETE/HEAD/OPTIONS unless noted)
-----------------------------------------------------------------------
/echo, /echo/...            200 JSON describing the request:
                            {"method", "path" (without query), "query"
                            ({name: value}, last value wins, percent-decoded),
                            "rawQuery", "headers" ({lowercased-name: value},
                            repeated headers joined with ", "), "body" (UTF-8,
                            errors replaced), "json" (parsed body or null),
                            "form" (urlencoded body as {k: v} when the
                            Content-Type is application/x-www-form-urlencoded,
                            else null)}
/status/<code>              that status (200..599) with {"status": code};
                            ?retryAfter=S adds "Retry-After: S".  204 and 304
                            are sent without a body, as HTTP requires.
/delay/<ms>                 sleeps ms milliseconds, then 200 {"delayedMs": ms}
/flaky/<key>/<n>            counter <key> += 1 (k = new value).  While k <= n:
                            status ?status= (default 503) with {"attempt": k}
                            and, with ?retryAfter=S, "Retry-After: S".  After
                            that: 200 {"attempt": k, "ok": true}
/hits/<key>                 counter <key> += 1, 200 {"hits": count};
                            ?ms=N waits N ms first
/count/<key>                200 {"count": count} (0 if unknown), no increment
/count-status/<key>/<code>  counter <key> += 1, answers status <code> with
                            {"status": code, "count": count}
/reset, /reset/<key>        clears all counters / one counter: 200 {"reset": ...}
/gzip                       {"compressed": true, "data": "a"*1000}, gzipped
                            with "Content-Encoding: gzip" if Accept-Encoding
                            allows gzip
/deflate                    the same body, zlib "deflate" encoded with
                            "Content-Encoding: deflate" if accepted
/redirect/<n>               n > 0: 302, "Location: /redirect/<n-1>" (relative),
                            empty body; n == 0: 200 {"redirected": true}
/redirect-to?to=URL         ?status= (default 302) with "Location: URL" (any
                            URL, another origin's or scheme's), empty body
                            (?pad=N: N bytes of "R"); ?close=1 closes the
                            connection after it without "Connection: close"
                            (legal, and a kept-alive client learns it late)
/large/<bytes>              200 application/octet-stream, exactly <bytes> bytes
                            of the pattern 0,1,...,255,0,1,... in 64 KiB writes
/slow-body/<chunks>/<ms>    200 application/octet-stream, Content-Length =
                            chunks*1024; writes 1024 bytes (same pattern),
                            flushes, sleeps ms, repeats
/chunked/<chunks>           200 application/octet-stream sent with
                            "Transfer-Encoding: chunked": <chunks> chunks of
                            1024 pattern bytes; optional ?ms= pause between them
/bearer/<token>             200 {"authenticated": true} if "Authorization:
                            Bearer <token>", else 401 {"error": "unauthorized"}
                            with "WWW-Authenticate: Bearer"
/text                       200 text/plain; charset=utf-8 "hello, hydra";
                            ?bytes=N: N bytes of ?fill= (one character, default "a");
                            ?body=S and/or ?type=CT: S with Content-Type CT;
                            ?status=N: that status instead of 200
/items                      200 {"items": [{"id": 1, "name": "one"}, {"id": 2,
                            "name": "two"}, {"id": 3, "name": "three"}],
                            "count": 3}
/login    (POST only)       JSON {"user", "password"}: 200 {"token":
                            "tok-<user>"} if password == "secret", else 401
                            {"error": "unauthorized"}; other methods: 405
/me                         200 {"user": <user>} with "Authorization: Bearer
                            tok-<user>", else 401 {"error": "unauthorized"}
/bad-json                   200, Content-Type application/json, body "{not json"
/bad-length?value=V         200 with "Content-Length: V" as given (say a number
                            too large for 64 bits), body "ok", then closes
/headers                    200 {"ok": true} with "X-Custom: yes", "X-Multi: a"
/gzip-bomb/<mib>            200 application/octet-stream: <mib> MiB of zero
                            bytes, gzipped (about 1 KiB per MiB), always with
                            "Content-Encoding: gzip" and the compressed
                            Content-Length; a compression bomb for body limits
/oauth/token (POST)         an OAuth2 token endpoint (RFC 6749): form body with
                            grant_type client_credentials (client "app" with
                            secret "s3cret" in HTTP Basic; a public client
                            sends "app:" in Basic and client_id=app in the body,
                            counted as "token:K:public-basic"), password (user
                            "alice", password "wonderland") or refresh_token.
                            ?key=K keeps one test's tokens apart: counters
                            "token:K" and "token:K:<grant_type>" count every
                            request; answers {"access_token",
                            "token_type": "bearer", "expires_in", "refresh_token"}
                            with ?ttl=S (default 60) and ?delayMs=N (sleep
                            first); ?refresh=0 issues no refresh token;
                            ?expires=0 leaves expires_in out.  Bad
                            client: 401 {"error": "invalid_client"}; bad grant:
                            400 {"error": "invalid_grant"}
/oauth/html                 200 text/html "<html>login page</html>" (a token
                            endpoint that answers garbage)
/oauth/revoke?key=K          every access token issued so far under K stops working
/protected/...              200 {"ok": true, "authorization": <the header>}
                            with "Authorization: Bearer <token>" of a live
                            token issued by /oauth/token (counter "protected:K"
                            for ?key=K counts them), else 401 with
                            "WWW-Authenticate: Bearer" (counter "protected-401:K");
                            ?ms=N answers a live token after N ms
/upload                     parses the request body with Python's email parser:
                            200 {"method", "contentType", "contentEncoding",
                            "bytes" (as received), "md5ok" (Content-MD5 checked
                            against the bytes received; null without one),
                            "sha256" (of the body after gunzip when
                            Content-Encoding is gzip), "parts" (multipart only:
                            [{"name", "filename", "contentType", "bytes",
                            "sha256", "text" (first 200 characters)}])}.
                            ?auth=K: only with "Authorization: Bearer <token>"
                            of a live /oauth/token token (as /protected); else,
                            once the body is read, 401 with "WWW-Authenticate:
                            Bearer" (counter "upload-401:K"; accepted uploads
                            count "upload:K")
/sink                       reads the body as it comes (Content-Length or
                            chunked) without keeping it: 200 {"bytes", "sha256"}
/cacheable/<key>            counter "cacheable:<key>" += 1; 200 {"n": count,
                            "key"} with the caching headers the query asks
                            for: ?cc= (Cache-Control), ?expires=S (Expires S
                            seconds from now, with Date), ?etag= (ETag), ?lm=
                            (Last-Modified).  A matching If-None-Match or
                            If-Modified-Since answers 304 with those headers
                            (counter "304:<key>"); ?ms=N answers after N ms;
                            ?fail=C1,C2,... answers the requests after the
                            first with those statuses, in turn; ?slowAfter=N
                            answers the requests after the first after N ms
/abort                      resets the connection (RST) without answering
/conn                       200 {"port": the client's source port}; ?close=1,
                            ?linger=MS, ?dropNext=1 (the next request on the
                            connection is read and not answered: it closes)
/cut-headers                "HTTP/1.1 200 OK" and one header line, then closes
                            (FIN) before the blank line that ends the headers
/resource/<key>             a cacheable file for the resource manager's tests:
                            body "resource <key> v1" padded with "." to ?size=,
                            ETag, Last-Modified and "Accept-Ranges: bytes"; 304,
                            206 (Range), cut bodies and counters "res-<key>",
                            "res304-<key>", "resrange-<key>", "resbytes-<key>".
                            Its options are listed in Handler.resource's
                            docstring; among them ?ranges=0 leaves
                            "Accept-Ranges" out of every answer (a server that
                            does not offer resumption; a Range it is sent
                            anyway is still answered, and counted, so a test
                            sees whether the client sent one)
anything else               404 {"error": "not found", "path": <path>}

A malformed number in a path or query answers 400 {"error": ...}.
"""

import argparse
import gzip
import json
import os
import socket
import struct
import sys
import threading
import time
import urllib.parse
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

# ---------------------------------------------------------------------------
# Shared state
# ---------------------------------------------------------------------------

# One namespace of named counters, shared by /hits, /flaky and /count-status
# and read by /count.  Tests should use distinct keys per test.
_counters: dict[str, int] = {}
_counters_lock = threading.Lock()


def _increment(key: str) -> int:
    """Adds one to counter `key` and returns the new value."""
    with _counters_lock:
        value = _counters.get(key, 0) + 1
        _counters[key] = value
        return value


def _read_counter(key: str) -> int:
    with _counters_lock:
        return _counters.get(key, 0)


# ---------------------------------------------------------------------------
# Static payloads
# ---------------------------------------------------------------------------

_PATTERN = bytes(range(256))
_PIECE_SIZE = 64 * 1024
# 64 KiB of the repeating 0..255 pattern.  64 KiB is a multiple of 256, so
# every piece (and every 1 KiB slice of it) starts at pattern byte 0.
_PIECE = _PATTERN * (_PIECE_SIZE // len(_PATTERN))
_KIB = _PIECE[:1024]

_COMPRESSIBLE = json.dumps({"compressed": True, "data": "a" * 1000}).encode()

_ITEMS = {
    "items": [
        {"id": 1, "name": "one"},
        {"id": 2, "name": "two"},
        {"id": 3, "name": "three"},
    ],
    "count": 3,
}

# OAuth2 test tokens: access token -> (expiry (time.time()), key), refresh tokens issued.
_TOKENS: dict[str, tuple] = {}
_REFRESH: set[str] = set()
_TOKENS_LOCK = threading.Lock()

_BOMBS: dict[int, bytes] = {}
_BOMBS_LOCK = threading.Lock()


def _gzip_bomb(mib: int) -> bytes:
    """`mib` MiB of zeros, gzipped; made once per size (256 MiB take ~1 s)."""
    with _BOMBS_LOCK:
        if mib not in _BOMBS:
            compressor = zlib.compressobj(9, zlib.DEFLATED, 31)  # wbits 31: gzip framing
            zeros = bytes(1 << 20)
            parts = [compressor.compress(zeros) for _ in range(mib)]
            parts.append(compressor.flush())
            _BOMBS[mib] = b"".join(parts)
        return _BOMBS[mib]


# Errors that mean "the client went away"; streaming endpoints swallow them.
_DISCONNECTS = (BrokenPipeError, ConnectionResetError, ConnectionAbortedError)


class BadRequest(Exception):
    """Raised by handlers to answer 400 with the message."""


def _int(text: str, what: str) -> int:
    try:
        return int(text)
    except (TypeError, ValueError):
        raise BadRequest(f"{what} must be an integer, got {text!r}") from None


def _accepts(accept_encoding: str, coding: str) -> bool:
    """True if an Accept-Encoding value allows `coding` (honours q=0)."""
    for item in accept_encoding.split(","):
        name, _, params = item.strip().partition(";")
        if name.strip().lower() not in (coding, "*"):
            continue
        q = 1.0
        for param in params.split(";"):
            key, _, value = param.strip().partition("=")
            if key.strip().lower() == "q":
                try:
                    q = float(value)
                except ValueError:
                    q = 0.0
        return q > 0
    return False


# ---------------------------------------------------------------------------
# Request handler
# ---------------------------------------------------------------------------


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive
    server_version = "HydraTestServer/1.0"

    def version_string(self):
        return self.server_version

    def log_message(self, format, *args):  # noqa: A002 - stdlib signature
        """Silence per-request logging (stdout is reserved for "PORT n")."""

    # All methods share one dispatcher.
    def do_GET(self):
        self._dispatch()

    do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = do_GET

    # -- request parsing ----------------------------------------------------

    def _read_body(self) -> bytes:
        """Reads the whole request body (Content-Length or chunked)."""
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            parts = []
            while True:
                line = self.rfile.readline(65537)
                size = int(line.split(b";", 1)[0].strip() or b"0", 16)
                if size == 0:
                    # Skip optional trailers up to the terminating blank line.
                    while self.rfile.readline(65537) not in (b"\r\n", b"\n", b""):
                        pass
                    break
                parts.append(self.rfile.read(size))
                self.rfile.readline(65537)  # CRLF after the chunk data
            return b"".join(parts)
        length = self.headers.get("Content-Length")
        if length is None:
            return b""
        length = int(length)
        if length < 0:
            raise ValueError("negative Content-Length")
        return self.rfile.read(length)

    # -- response helpers ---------------------------------------------------

    def _send(self, status: int, body: bytes = b"", content_type=None, headers=()):
        """Sends a complete response with Content-Length (body omitted for HEAD)."""
        no_body = status in (204, 304) or status < 200
        if no_body:
            body = b""
        self.send_response(status)
        if content_type and not no_body:
            self.send_header("Content-Type", content_type)
        for name, value in headers:
            self.send_header(name, value)
        if status != 204 and status >= 200:
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self._headers_sent = True
        if body and self.command != "HEAD":
            self.wfile.write(body)

    def _json(self, status: int, obj, headers=()):
        self._send(status, json.dumps(obj).encode(), "application/json", headers)

    def _unauthorized(self, headers=()):
        self._json(401, {"error": "unauthorized"}, headers)

    # -- dispatch -------------------------------------------------------------

    def _dispatch(self):
        self._headers_sent = False
        if getattr(self, "drop_next", False):
            # /conn?dropNext=1 answered the previous request of this connection:
            # this one is read, then the connection closes without an answer.
            self.drop_next = False
            self.close_connection = True
            self._headers_sent = True
            return
        try:
            # /sink reads its body itself, as it comes.
            self.body = b"" if self.path.split("?")[0] == "/sink" else self._read_body()
        except (ValueError, OSError):
            self.close_connection = True
            self._json(400, {"error": "unreadable request body"})
            return

        split = urllib.parse.urlsplit(self.path)
        self.req_path = split.path
        self.raw_query = split.query
        # Last value wins; keep_blank_values so "?a=" yields {"a": ""}.
        self.query = dict(urllib.parse.parse_qsl(split.query, keep_blank_values=True))
        segments = [urllib.parse.unquote(s) for s in split.path.split("/")[1:]]
        name, args = (segments[0], segments[1:]) if segments else ("", [])

        route = _ROUTES.get(name)
        try:
            if route is None:
                self._not_found()
            else:
                method, arity = route
                if arity is not None and len(args) != arity:
                    self._not_found()
                else:
                    method(self, *(args if arity is not None else ()))
        except _DISCONNECTS:
            self.close_connection = True
        except BadRequest as error:
            if self._headers_sent:
                self.close_connection = True
            else:
                self._json(400, {"error": str(error)})
        except Exception as error:  # keep serving; report the failure
            self.close_connection = True
            if not self._headers_sent:
                try:
                    self._json(500, {"error": f"{type(error).__name__}: {error}"})
                except _DISCONNECTS:
                    pass

    def _not_found(self):
        self._json(404, {"error": "not found", "path": self.req_path})

    # -- endpoints ------------------------------------------------------------

    def echo(self):
        headers: dict[str, str] = {}
        for key, value in self.headers.items():
            key = key.lower()
            headers[key] = f"{headers[key]}, {value}" if key in headers else value
        text = self.body.decode("utf-8", errors="replace")
        try:
            parsed_json = json.loads(text) if self.body else None
        except ValueError:
            parsed_json = None
        form = None
        content_type = self.headers.get("Content-Type", "").split(";")[0].strip().lower()
        if content_type == "application/x-www-form-urlencoded":
            form = dict(urllib.parse.parse_qsl(text, keep_blank_values=True))
        self._json(200, {
            "method": self.command,
            "path": self.req_path,
            "query": self.query,
            "rawQuery": self.raw_query,
            "headers": headers,
            "body": text,
            "json": parsed_json,
            "form": form,
        })

    def _retry_after(self):
        value = self.query.get("retryAfter")
        return [("Retry-After", value)] if value is not None else []

    def _status_code(self, text: str) -> int:
        code = _int(text, "status")
        if not 200 <= code <= 599:
            raise BadRequest(f"status must be 200..599, got {code}")
        return code

    def status(self, code):
        code = self._status_code(code)
        self._json(code, {"status": code}, self._retry_after())

    def delay(self, ms):
        ms = _int(ms, "ms")
        time.sleep(max(ms, 0) / 1000)
        self._json(200, {"delayedMs": ms})

    def flaky(self, key, n):
        n = _int(n, "n")
        code = self._status_code(self.query.get("status", "503"))
        attempt = _increment(key)
        if attempt <= n:
            self._json(code, {"attempt": attempt}, self._retry_after())
        else:
            self._json(200, {"attempt": attempt, "ok": True})

    def hits(self, key):
        ms = _int(self.query.get("ms", "0"), "ms")
        if ms > 0:
            time.sleep(ms / 1000)
        self._json(200, {"hits": _increment(key)})

    def count(self, key):
        self._json(200, {"count": _read_counter(key)})

    def count_status(self, key, code):
        code = self._status_code(code)
        count = _increment(key)
        self._json(code, {"status": code, "count": count})

    def reset(self):
        # Optional: /reset clears every counter, /reset/<key> just one.
        segments = [urllib.parse.unquote(s) for s in self.req_path.split("/")[2:] if s]
        with _counters_lock:
            if segments:
                for key in segments[:1]:
                    _counters.pop(key, None)
            else:
                _counters.clear()
        self._json(200, {"reset": segments[0] if segments else "all"})

    def _encoded(self, coding, compress):
        accept = self.headers.get("Accept-Encoding", "")
        if _accepts(accept, coding):
            self._send(200, compress(_COMPRESSIBLE), "application/json",
                       [("Content-Encoding", coding), ("Vary", "Accept-Encoding")])
        else:
            self._send(200, _COMPRESSIBLE, "application/json",
                       [("Vary", "Accept-Encoding")])

    def gzip(self):
        self._encoded("gzip", lambda data: gzip.compress(data, mtime=0))

    def deflate(self):
        # HTTP "deflate" is the zlib format (RFC 1950), which zlib.compress makes.
        self._encoded("deflate", zlib.compress)

    def redirect(self, n):
        n = _int(n, "n")
        if n > 0:
            self._send(302, b"", None, [("Location", f"/redirect/{n - 1}")])
        else:
            self._json(200, {"redirected": True})

    def redirect_to(self):
        code = self._status_code(self.query.get("status", "302"))
        pad = _int(self.query.get("pad", "0"), "pad")
        if not 0 <= pad <= 16 << 20:
            raise BadRequest("pad must be 0..16777216")
        self._send(code, b"R" * pad, None, [("Location", self.query.get("to", "/"))])
        if self.query.get("close") == "1":
            self.close_connection = True

    def _start_octets(self, length):
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(length))
        self.end_headers()
        self._headers_sent = True

    def large(self, size):
        size = _int(size, "bytes")
        if size < 0:
            raise BadRequest("bytes must be >= 0")
        self._start_octets(size)
        if self.command == "HEAD":
            return
        remaining = size
        while remaining > 0:
            piece = _PIECE if remaining >= _PIECE_SIZE else _PIECE[:remaining]
            self.wfile.write(piece)
            remaining -= len(piece)

    def slow_body(self, chunks, ms):
        chunks, ms = _int(chunks, "chunks"), _int(ms, "ms")
        if chunks < 0:
            raise BadRequest("chunks must be >= 0")
        self._start_octets(chunks * 1024)
        if self.command == "HEAD":
            return
        self.wfile.flush()
        for index in range(chunks):
            self.wfile.write(_KIB)
            self.wfile.flush()
            if index + 1 < chunks:
                time.sleep(max(ms, 0) / 1000)

    def chunked(self, chunks):
        chunks = _int(chunks, "chunks")
        ms = _int(self.query.get("ms", "0"), "ms")
        chunked = self.request_version != "HTTP/1.0"
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        if chunked:
            self.send_header("Transfer-Encoding", "chunked")
        else:
            # HTTP/1.0 has no chunked encoding: delimit the body by closing.
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        self._headers_sent = True
        if self.command == "HEAD":
            return
        for index in range(max(chunks, 0)):
            if index and ms > 0:
                time.sleep(ms / 1000)
            self.wfile.write(b"400\r\n" + _KIB + b"\r\n" if chunked else _KIB)
            self.wfile.flush()
        if chunked:
            self.wfile.write(b"0\r\n\r\n")

    def bearer(self, token):
        if self.headers.get("Authorization", "") == f"Bearer {token}":
            self._json(200, {"authenticated": True})
        else:
            self._unauthorized([("WWW-Authenticate", "Bearer")])

    def text(self):
        status = _int(self.query.get("status", "200"), "status")
        if "type" in self.query or "body" in self.query:
            body = self.query.get("body", "hello, hydra").encode()
            self._send(status, body, self.query.get("type", "text/plain; charset=utf-8"))
            return
        if "bytes" in self.query:
            size = _int(self.query["bytes"], "bytes")
            if not 0 <= size <= 16 << 20:
                raise BadRequest("bytes must be 0..16777216")
            fill = self.query.get("fill", "a").encode()[:1] or b"a"
            self._send(status, fill * size, "text/plain; charset=utf-8")
            return
        self._send(200, b"hello, hydra", "text/plain; charset=utf-8")

    def items(self):
        self._json(200, _ITEMS)

    def login(self):
        if self.command != "POST":
            self._send(405, json.dumps({"error": "method not allowed"}).encode(),
                       "application/json", [("Allow", "POST")])
            return
        try:
            payload = json.loads(self.body.decode("utf-8", errors="replace"))
        except ValueError:
            payload = None
        if (isinstance(payload, dict) and isinstance(payload.get("user"), str)
                and payload.get("password") == "secret"):
            self._json(200, {"token": f"tok-{payload['user']}"})
        else:
            self._unauthorized()

    def me(self):
        auth = self.headers.get("Authorization", "")
        prefix = "Bearer tok-"
        if auth.startswith(prefix) and len(auth) > len(prefix):
            self._json(200, {"user": auth[len(prefix):]})
        else:
            self._unauthorized()

    def bad_json(self):
        self._send(200, b"{not json", "application/json")

    def bad_length(self):
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", self.query.get("value", "x"))
        self.end_headers()
        self._headers_sent = True
        self.wfile.write(b"ok")
        self.close_connection = True

    def conn(self):
        """Reports the client's source port (tells connections apart).
        ?close=1 answers with Connection: close; ?linger=MS keeps the
        connection open after the answer, then closes it MS later;
        ?dropNext=1 keeps it open and closes it, unanswered, when the next
        request on it arrives (a kept-alive connection that died: a client
        must retry that request on a new one)."""
        close = self.query.get("close") == "1"
        self.drop_next = self.query.get("dropNext") == "1"
        linger = _int(self.query.get("linger", "0"), "linger")
        headers = [("Connection", "close")] if close else []
        self._json(200, {"port": self.client_address[1]}, headers)
        if close:
            self.close_connection = True
        elif linger > 0:
            self.wfile.flush()
            time.sleep(linger / 1000)
            self.close_connection = True

    def abort(self):
        """Resets the connection without answering (RST: SO_LINGER 0, then close)."""
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.close_connection = True
        self._headers_sent = True
        self.connection.close()

    def cut_headers(self):
        """A response cut inside its headers: a status line, a field, then FIN."""
        self.wfile.write(b"HTTP/1.1 200 OK\r\nX-A: b\r\n")
        self.wfile.flush()
        self.close_connection = True
        self._headers_sent = True
        self.connection.shutdown(socket.SHUT_WR)

    def gzip_bomb(self, mib):
        mib = _int(mib, "mib")
        if not 0 <= mib <= 4096:
            raise BadRequest("mib must be 0..4096")
        self._send(200, _gzip_bomb(mib), "application/octet-stream", [("Content-Encoding", "gzip")])

    def headers_endpoint(self):
        self._json(200, {"ok": True}, [("X-Custom", "yes"), ("X-Multi", "a")])

    def resource(self, key):
        """A cacheable file for the resource manager's tests: the body is
        `resource <key> v<v>` (`?v=`, default 1) padded to `?size=` bytes,
        with an ETag naming key and version (none with `?etag=0`) and a fixed
        Last-Modified; `If-None-Match` / `If-Modified-Since` that still match
        get 304. `?delay=` ms holds the answer. Counters: `res-<key>` (requests),
        `res304-<key>` (304s), `resbytes-<key>` (body bytes sent);
        `?status=` answers that status instead (`?type=` sets Content-Type);
        `?cut=first` sends half the body of the first request under the full
        Content-Length and closes (a lying length, a cut connection), `?cut=after1`
        does so for every request after the first; `?validators=0` sends
        neither ETag nor Last-Modified; `?gz=1` sends the body gzipped (as
        its content, no Content-Encoding), `?gz=bad` a corrupt gzip body;
        `?bump=1` makes the version the request's count (the same URL
        answers another body each time).
        `Range: bytes=N-` (with a matching `If-Range` or none) answers 206
        with the rest (counter `resrange-<key>`); a cut sends half of that.
        `?lie304=1` answers any `If-None-Match` with 304 and another ETag.
        `?ranges=0` sends no `Accept-Ranges` header in any answer (the server
        does not say it takes ranges; a `Range` request is still answered
        with 206 and counted in `resrange-<key>`, so a client that sends one
        anyway shows).
        `?short206=1` answers a Range request with a 206 whose Content-Range
        (and body) covers only half of the rest; `?norange=1` answers it with
        200 and the whole body (Accept-Ranges notwithstanding).
        `?cut=stall2` cuts the first request like `first`, and sends the
        second a quarter of what it asked for, then nothing for 3 s (the
        client times out with bytes written past what it kept).
        `?changed206=1` answers a Range request, whatever its If-Range, with a
        206 of another version (another body and ETag: a server that ignores
        If-Range, its padding `x`); `?total206=N` answers a Range request as if
        the body were N bytes long (padded with `!`), unlike the first answer."""
        count = _increment(f"res-{key}")
        cut = self.query.get("cut", "")
        cutting = (cut in ("first", "stall2") and count == 1) or (cut == "after1" and count > 1)
        stalling = cut == "stall2" and count == 2
        delay = _int(self.query.get("delay", "0"), "delay")
        if delay:
            time.sleep(delay / 1000)
        if "status" in self.query:
            self._json(self._status_code(self.query["status"]), {"error": "as asked"})
            return
        changed = self.query.get("changed206") == "1" and "Range" in self.headers
        version = "changed" if changed else str(count) if self.query.get("bump") == "1" else self.query.get("v", "1")
        body = f"resource {key} v{version}".encode()
        size = _int(self.query.get("size", "0"), "size")
        if size > len(body):
            body += (b"x" if changed else b".") * (size - len(body))
        if "total206" in self.query and "Range" in self.headers:
            longer = _int(self.query["total206"], "total206")
            if longer > len(body):
                body += b"!" * (longer - len(body))
        etag = f'"{key}-{version}"'
        modified = "Mon, 23 Nov 2026 10:00:00 GMT"
        headers = [("Last-Modified", modified), ("Accept-Ranges", "bytes")]
        if self.query.get("validators", "1") == "0":
            headers = [("Accept-Ranges", "bytes")]  # nothing to revalidate with
            unchanged = False
        elif self.query.get("etag", "1") != "0":
            headers.append(("ETag", etag))
            match = self.headers.get("If-None-Match")
            unchanged = match is not None and match == etag
        else:
            unchanged = self.headers.get("If-Modified-Since") == modified
        if self.query.get("ranges", "1") == "0":
            headers = [h for h in headers if h[0] != "Accept-Ranges"]  # no resumption offered
        if self.query.get("lie304") == "1" and self.headers.get("If-None-Match"):
            _increment(f"res304-{key}")
            self._send(304, b"", None, [("ETag", '"another"')])
            return
        if unchanged:
            _increment(f"res304-{key}")
            self._send(304, b"", None, headers)
            return
        # Range resume: `Range: bytes=N-` (with a matching If-Range, or none) gets 206 and the rest.
        start = 0
        wanted = self.headers.get("Range", "")
        if_range = self.headers.get("If-Range")
        if wanted.startswith("bytes=") and wanted.endswith("-") and (if_range is None or if_range in (etag, modified) or changed) \
                and self.query.get("norange") != "1":
            start = min(_int(wanted[6:-1], "range"), len(body))
            _increment(f"resrange-{key}")
        if cutting or stalling:
            self.send_response(206 if start else 200)
            self.send_header("Content-Length", str(len(body) - start))
            if start:
                self.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
            for name, value in headers:
                self.send_header(name, value)
            self.end_headers()
            self._headers_sent = True
            half = body[start:start + (len(body) - start) // (4 if stalling else 2)]
            with _counters_lock:
                _counters[f"resbytes-{key}"] = _counters.get(f"resbytes-{key}", 0) + len(half)
            self.wfile.write(half)
            self.wfile.flush()
            if stalling:
                time.sleep(3)
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        if self.query.get("gz") == "1":
            body = gzip.compress(body)  # the body itself is gzip (no Content-Encoding)
        elif self.query.get("gz") == "bad":
            body = gzip.compress(body)[:-12] + b"not gzip"
        if start:
            total = len(body)
            body = body[start:]
            if self.query.get("short206") == "1":
                body = body[:len(body) // 2]
            headers.append(("Content-Range", f"bytes {start}-{start + len(body) - 1}/{total}"))
        with _counters_lock:
            _counters[f"resbytes-{key}"] = _counters.get(f"resbytes-{key}", 0) + len(body)
        self._send(206 if start else 200, body, self.query.get("type", "text/plain; charset=utf-8"), headers)


# First path segment -> (handler, number of further segments; None = any).
_ROUTES = {
    "echo": (Handler.echo, None),
    "status": (Handler.status, 1),
    "delay": (Handler.delay, 1),
    "flaky": (Handler.flaky, 2),
    "hits": (Handler.hits, 1),
    "count": (Handler.count, 1),
    "count-status": (Handler.count_status, 2),
    "reset": (Handler.reset, None),
    "gzip": (Handler.gzip, 0),
    "deflate": (Handler.deflate, 0),
    "redirect": (Handler.redirect, 1),
    "redirect-to": (Handler.redirect_to, 0),
    "large": (Handler.large, 1),
    "slow-body": (Handler.slow_body, 2),
    "chunked": (Handler.chunked, 1),
    "bearer": (Handler.bearer, 1),
    "text": (Handler.text, 0),
    "items": (Handler.items, 0),
    "login": (Handler.login, 0),
    "me": (Handler.me, 0),
    "bad-json": (Handler.bad_json, 0),
    "bad-length": (Handler.bad_length, 0),
    "headers": (Handler.headers_endpoint, 0),
    "conn": (Handler.conn, 0),
    "gzip-bomb": (Handler.gzip_bomb, 1),
    "abort": (Handler.abort, 0),
    "cut-headers": (Handler.cut_headers, 0),
    "resource": (Handler.resource, 1),
}


def _oauth(self, action):
    if action == "html":
        return self._send(200, b"<html>login page</html>", "text/html")
    if action == "revoke":
        key = self.query.get("key", "")
        with _TOKENS_LOCK:
            for token in [t for t, (_, k) in _TOKENS.items() if k == key]:
                del _TOKENS[token]
        return self._json(200, {"revoked": True})
    if action != "token":
        return self._not_found()
    if self.command != "POST":
        return self._json(405, {"error": "method not allowed"})
    form = dict(urllib.parse.parse_qsl(self.body.decode("utf-8", errors="replace"), keep_blank_values=True))
    grant = form.get("grant_type", "")
    key = self.query.get("key", "")
    _increment("token:" + key)
    _increment("token:" + key + ":" + grant)
    delay = _int(self.query.get("delayMs", "0"), "delayMs")
    if delay > 0:
        time.sleep(delay / 1000)
    auth = self.headers.get("Authorization", "")
    if auth.startswith("Basic "):
        import base64
        try:
            client, _, secret = base64.b64decode(auth[6:]).decode().partition(":")
        except ValueError:
            client, secret = "", ""
        client, secret = urllib.parse.unquote_plus(client), urllib.parse.unquote_plus(secret)
        # A confidential client's secret, or a public client's empty one (which
        # names itself in the body too).
        if client != "app" or (secret != "s3cret" and (secret != "" or form.get("client_id") != "app")):
            return self._json(401, {"error": "invalid_client"})
        if secret == "":
            _increment("token:" + key + ":public-basic")
    elif form.get("client_id") != "app":
        return self._json(401, {"error": "invalid_client"})
    with _TOKENS_LOCK:
        if grant == "password":
            if form.get("username") != "alice" or form.get("password") != "wonderland":
                return self._json(400, {"error": "invalid_grant"})
        elif grant == "refresh_token":
            if form.get("refresh_token") not in _REFRESH:
                return self._json(400, {"error": "invalid_grant"})
            _REFRESH.discard(form.get("refresh_token"))
        elif grant != "client_credentials":
            return self._json(400, {"error": "unsupported_grant_type"})
        ttl = _int(self.query.get("ttl", "60"), "ttl")
        n = _read_counter("token:" + key)
        access = f"tok-{n}-{os.urandom(6).hex()}"
        _TOKENS[access] = (time.time() + ttl, key)
        answer = {"access_token": access, "token_type": "bearer", "expires_in": ttl}
        if self.query.get("expires", "1") == "0":
            del answer["expires_in"]
        if self.query.get("refresh", "1") != "0":
            refresh = f"ref-{n}-{os.urandom(6).hex()}"
            _REFRESH.add(refresh)
            answer["refresh_token"] = refresh
    self._json(200, answer)


def _live_bearer(self) -> bool:
    """True when the request carries "Authorization: Bearer <t>" with a live /oauth/token token."""
    auth = self.headers.get("Authorization", "")
    token = auth[7:] if auth.startswith("Bearer ") else ""
    with _TOKENS_LOCK:
        return token in _TOKENS and _TOKENS[token][0] > time.time()


def _upload(self):
    import base64
    import hashlib
    from email.parser import BytesParser
    from email import policy
    if "auth" in self.query:
        # The body was read in full before this (_dispatch): a refused upload consumed it.
        if not _live_bearer(self):
            _increment("upload-401:" + self.query["auth"])
            return self._json(401, {"error": "unauthorized"}, [("WWW-Authenticate", "Bearer")])
        _increment("upload:" + self.query["auth"])
    raw = self.body
    md5 = self.headers.get("Content-MD5")
    md5ok = None if md5 is None else base64.b64encode(hashlib.md5(raw).digest()).decode() == md5
    encoding = self.headers.get("Content-Encoding", "")
    body = gzip.decompress(raw) if encoding == "gzip" else raw
    content_type = self.headers.get("Content-Type", "")
    answer = {"method": self.command, "contentType": content_type, "contentEncoding": encoding,
              "bytes": len(raw), "md5ok": md5ok, "sha256": hashlib.sha256(body).hexdigest()}
    if content_type.startswith("multipart/"):
        message = BytesParser(policy=policy.HTTP).parsebytes(
            b"Content-Type: " + content_type.encode() + b"\r\nMIME-Version: 1.0\r\n\r\n" + body)
        if not message.is_multipart():
            raise BadRequest("not a multipart body")
        parts = []
        for part in message.iter_parts():
            data = part.get_payload(decode=True) or b""
            parts.append({"name": part.get_param("name", header="content-disposition"),
                          "filename": part.get_filename(), "contentType": part.get_content_type()
                          if part.get("Content-Type") else None,
                          "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest(),
                          "text": data[:200].decode("utf-8", errors="replace")})
        answer["parts"] = parts
    self._json(200, answer)


def _sink(self):
    import hashlib
    digest = hashlib.sha256()
    total = 0

    def drain(left):
        """Reads and hashes `left` bytes in pieces of at most 1 MiB; returns how many."""
        count = 0
        while left > 0:
            piece = self.rfile.read(min(left, 1 << 20))
            if not piece:
                raise BadRequest("the body ended early")
            digest.update(piece)
            count += len(piece)
            left -= len(piece)
        return count

    if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
        while True:
            size = int(self.rfile.readline(65537).split(b";", 1)[0].strip() or b"0", 16)
            if size == 0:
                while self.rfile.readline(65537) not in (b"\r\n", b"\n", b""):
                    pass
                break
            total += drain(size)
            self.rfile.readline(65537)
    else:
        total = drain(int(self.headers.get("Content-Length", "0")))
    self._json(200, {"bytes": total, "sha256": digest.hexdigest()})


def _cacheable(self, key):
    from email.utils import formatdate
    count = _increment("cacheable:" + key)
    if "ms" in self.query:
        time.sleep(_int(self.query["ms"], "ms") / 1000)
    if count > 1 and "slowAfter" in self.query:
        time.sleep(_int(self.query["slowAfter"], "slowAfter") / 1000)
    failing = [code for code in self.query.get("fail", "").split(",") if code]
    if count > 1 and count - 2 < len(failing):
        return self._json(self._status_code(failing[count - 2]), {"error": "as asked"})
    headers = []
    if "cc" in self.query:
        headers.append(("Cache-Control", self.query["cc"]))
    if "expires" in self.query:
        now = time.time()
        headers.append(("Expires", formatdate(now + _int(self.query["expires"], "expires"), usegmt=True)))
    etag = self.query.get("etag")
    modified = self.query.get("lm")
    if etag:
        headers.append(("ETag", etag))
    if modified:
        headers.append(("Last-Modified", modified))
    if (etag and self.headers.get("If-None-Match") == etag) or (modified and self.headers.get("If-Modified-Since") == modified):
        _increment("304:" + key)
        return self._send(304, b"", None, headers)
    self._json(200, {"n": count, "key": key}, headers)


def _protected(self):
    auth = self.headers.get("Authorization", "")
    if not _live_bearer(self):
        _increment("protected-401:" + self.query.get("key", ""))
        return self._json(401, {"error": "unauthorized"}, [("WWW-Authenticate", "Bearer")])
    _increment("protected:" + self.query.get("key", ""))
    if "ms" in self.query:
        time.sleep(_int(self.query["ms"], "ms") / 1000)
    self._json(200, {"ok": True, "authorization": auth})


Handler.oauth = _oauth
Handler.protected = _protected
Handler.upload = _upload
Handler.cacheable = _cacheable
_ROUTES["cacheable"] = (Handler.cacheable, 1)
Handler.sink = _sink
_ROUTES["upload"] = (Handler.upload, 0)
_ROUTES["sink"] = (Handler.sink, 0)
_ROUTES["oauth"] = (Handler.oauth, 1)
_ROUTES["protected"] = (Handler.protected, None)


# ---------------------------------------------------------------------------
# Server
# ---------------------------------------------------------------------------


class Server(ThreadingHTTPServer):
    daemon_threads = True        # connection threads never block exit
    request_queue_size = 1024    # listen() backlog for bursts of connections
    allow_reuse_address = True


def _watch_stdin():
    """Exits the whole process as soon as stdin reaches EOF (parent died)."""
    try:
        while sys.stdin.buffer.read1(4096):
            pass
    except (OSError, ValueError):
        pass
    os._exit(0)


def main():
    parser = argparse.ArgumentParser(description="Hydra integration-test HTTP server")
    parser.add_argument("--port", type=int, default=0, help="port (0 = OS picks)")
    parser.add_argument("--ignore-stdin", action="store_true",
                        help="do not exit when stdin reaches EOF")
    options = parser.parse_args()

    server = Server(("127.0.0.1", options.port), Handler)  # binds and listens
    sys.stdout.write(f"PORT {server.server_address[1]}\n")
    sys.stdout.flush()

    if not options.ignore_stdin:
        threading.Thread(target=_watch_stdin, name="stdin-watch", daemon=True).start()
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


if __name__ == "__main__":
    main()
