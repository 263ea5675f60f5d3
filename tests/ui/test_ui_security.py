"""Every request to ``keel ui`` needs its token; every answer carries a strict policy.

Plain HTTP from the test (no browser): the pages, the data, the live stream and the static
files are refused (403) without the token, with a wrong one, or under another ``Host`` (a
DNS-rebinding page); with it, they answer, each with a Content-Security-Policy that allows
no inline script and no other origin.
"""

from __future__ import annotations

import pytest
from ui_support import SESSION, Server, request

ROUTES = [
    "/",
    "/static/app.js",
    "/static/app.css",
    "/api/meta",
    "/api/sessions",
    f"/api/timeline?session={SESSION}",
    f"/api/evidence?session={SESSION}",
    "/api/verify",
    "/api/stream",
    f"/api/stream?session={SESSION}",
    "/api/diff?checkpoint=0000",
    "/nothing-here",
]


@pytest.mark.parametrize("route", ROUTES)
def test_a_request_without_the_token_is_refused(server: Server, route: str) -> None:
    for headers in ({}, {"X-Keel-Token": "x" + server.token[1:]}, {"Cookie": "keel_ui_1=no"}):
        answer = request(f"{server.base}{route}", headers=headers)
        assert answer.status == 403, headers
        assert answer.json()["error"]["code"] == "ui.token"


def test_a_request_under_another_host_name_is_refused_even_with_the_token(
    server: Server,
) -> None:
    for host in ("evil.example", f"evil.example:{server.port}", "127.0.0.1"):
        answer = request(server.url, headers={"Host": host})
        assert answer.status == 403 and answer.json()["error"]["code"] == "ui.host"


def test_the_printed_url_opens_the_page_and_sets_a_strict_cookie(server: Server) -> None:
    assert server.url.startswith("http://127.0.0.1:") and len(server.token) >= 40
    page = request(server.url)
    assert page.status == 200 and b'<script src="/static/app.js"' in page.body
    cookie = page.headers["set-cookie"]
    assert cookie.startswith(f"keel_ui_{server.port}={server.token};")
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
    again = request(f"{server.base}/api/meta", headers={"Cookie": cookie.split(";")[0]})
    assert again.status == 200 and again.json()["root"]


def test_every_answer_carries_a_strict_content_security_policy(server: Server) -> None:
    token = {"X-Keel-Token": server.token}
    for route in ("/", "/static/app.js", "/api/sessions", "/nothing-here"):
        for headers in (token, {}):
            answer = request(f"{server.base}{route}", headers=headers)
            policy = answer.headers["content-security-policy"]
            assert "default-src 'none'" in policy and "script-src 'self'" in policy
            assert "unsafe-inline" not in policy and "frame-ancestors 'none'" in policy
            assert answer.headers["x-content-type-options"] == "nosniff"
            assert answer.headers["referrer-policy"] == "no-referrer"


def test_with_the_token_the_data_answers_and_unknown_things_are_404(server: Server) -> None:
    token = {"X-Keel-Token": server.token}
    sessions = request(f"{server.base}/api/sessions", headers=token).json()["sessions"]
    assert SESSION in [s["session_id"] for s in sessions]
    unknown = request(f"{server.base}/api/timeline?session=nope", headers=token)
    assert unknown.status == 404
    assert unknown.json()["error"]["code"] == "journal.session_unknown"
    missing = request(f"{server.base}/api/diff?checkpoint=abcdef12", headers=token)
    assert missing.status == 404
    assert request(f"{server.base}/static/..%2Fapp.py", headers=token).status == 404
