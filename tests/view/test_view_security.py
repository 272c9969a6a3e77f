"""`spu view` against hostile folders and requests: no link below the folder shown is followed,
NaN and deeply nested JSON give a page that says what is wrong (both modes), the served page answers
only on loopback, to its own Host, with the token of this start, and a client that drops its connection
prints nothing."""

from __future__ import annotations

import base64
import gzip
import http.client
import json
import re
import shutil
import socket
import struct
import subprocess
import threading
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from view_testing import SPU, spu

from environment.view.collect import collect
from environment.view.page import build_page
from environment.view.server import make_server, page_url

SECRET = "s3cret-outside-the-run"


def decode_all(html: str) -> str:
    """Every data block of the page, inflated, as one text."""
    blocks = re.findall(r'<script type="application/octet-stream" id="[^"]+"[^>]*>([^<]*)</script>', html)
    return "\n".join(gzip.decompress(base64.b64decode(b)).decode("utf-8") for b in blocks)


def all_problems(data: dict) -> list[dict]:
    return data["problems"] + [p for run in data["runs"] for p in run["problems"]]


@pytest.fixture
def outside(tmp_path) -> Path:
    """A folder beside the runs, holding what must never reach the page."""
    folder = tmp_path / "outside"
    (folder / "run").mkdir(parents=True)
    (folder / "secret.json").write_text(json.dumps({"rankings": [{"group_id": SECRET, "order": [SECRET]}]}))
    (folder / "secret.csv").write_text(f"configuration,value\n{SECRET},1\n")
    (folder / "run" / "rankings.json").write_text(json.dumps({"task_id": SECRET, "rankings": []}))
    (folder / "run" / "report.md").write_text(f"# {SECRET}\n")
    return folder


def test_links_out_of_the_folder_are_not_followed(demo_run, outside, tmp_path):
    runs = tmp_path / "runs"
    run = runs / "cfg" / "demo-aromatic-acidity" / "run-1"
    shutil.copytree(demo_run, run)
    (run / "report.md").unlink()
    (run / "report.md").symlink_to(outside / "run" / "report.md")  # a file link
    shutil.rmtree(run / "drafts")
    (run / "drafts").symlink_to(outside)  # a folder link (with JSON inside)
    (runs / "cfg" / "linked-run").symlink_to(outside / "run")  # a run folder link
    report = runs / "_report"
    report.mkdir()
    for name in ("summary.json", "report.md"):
        (report / name).symlink_to(outside / "secret.json")
    (report / "runs.csv").symlink_to(outside / "secret.csv")  # a link to a table: never a table
    data = collect(runs)
    html, _ = build_page(runs)
    assert SECRET not in decode_all(html) and SECRET not in html
    assert [r["label"] for r in data["runs"]] == ["cfg/demo-aromatic-acidity/run-1"]
    assert data["outputs"] == [] or all(not o["tables"] for o in data["outputs"])
    where = {p["where"] for p in all_problems(data) if "is a link" in p["message"]}
    assert "report.md" in where and "drafts" not in {r["label"] for r in data["runs"]}


def test_a_run_whose_files_all_link_out_is_shown_empty(outside, tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    for name in ("rankings.json", "run.json", "sources.json"):
        (run / name).symlink_to(outside / "secret.json")
    (run / "trajectory.jsonl").symlink_to("/etc/passwd")
    html, data = build_page(run)
    assert SECRET not in decode_all(html) and "root:" not in decode_all(html)
    where = {p["where"] for p in all_problems(data) if "is a link" in p["message"]}
    assert {"rankings.json", "run.json", "sources.json", "trajectory.jsonl"} <= where


def nan_run(root: Path) -> Path:
    run = root / "nan-run"
    run.mkdir(parents=True)
    (run / "rankings.json").write_text('{"task_id": "demo-aromatic-acidity", "score": NaN, "rankings": []}')
    record = {"type": "run_start", "elapsed_s": 0, "task_id": "demo-aromatic-acidity"}
    turn = '{"type": "tool_result", "elapsed_s": 1, "name": "python", "arguments": {"x": Infinity}}'
    (run / "trajectory.jsonl").write_text(json.dumps(record) + "\n" + turn + "\n")
    return run


def deep_run(root: Path) -> Path:
    run = root / "deep-run"
    run.mkdir(parents=True)
    deep = "[" * 100_000 + "]" * 100_000
    (run / "rankings.json").write_text(deep)
    (run / "run.json").write_text('{"a": ' * 5000 + "1" + "}" * 5000)
    record = {"type": "run_start", "elapsed_s": 0, "task_id": "x"}
    (run / "trajectory.jsonl").write_text(
        json.dumps(record) + "\n" + '{"type": "event", "x": ' + deep + "}\n"
    )
    return run


@pytest.mark.parametrize("make", [nan_run, deep_run])
def test_nan_and_deep_json_give_the_problem_page_in_out_mode(make, tmp_path):
    run = make(tmp_path)
    out = tmp_path / "page.html"
    done = spu("view", str(run), "--out", str(out), "--json")
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    html = out.read_text()
    assert json.loads(done.stdout)["problems"] >= 1
    assert re.search(r"NaN|nested too deeply|cannot be drawn", html + decode_all(html))


def test_nan_in_rankings_is_named(tmp_path):
    data = collect(nan_run(tmp_path))
    problems = {p["where"]: p["message"] for p in all_problems(data)}
    assert "NaN" in problems["rankings.json"]
    assert data["runs"][0]["rankings"] is None


class Served:
    """``make_server`` on a free loopback port, serving in a thread."""

    def __init__(self, render) -> None:
        self.server = make_server(render, 0)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def get(self, path: str, host: str | None = None) -> tuple[int, str]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        conn.putrequest("GET", path, skip_host=True)
        conn.putheader("Host", host if host is not None else f"127.0.0.1:{self.port}")
        conn.endheaders()
        response = conn.getresponse()
        body = response.read().decode("utf-8", errors="replace")
        conn.close()
        return response.status, body

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def served(tmp_path):
    started = []

    def start(path: Path) -> Served:
        server = Served(lambda: build_page(path)[0])
        started.append(server)
        return server

    yield start
    for server in started:
        server.close()


def test_the_served_page_needs_its_token_and_its_own_host(served, tmp_path):
    server = served(nan_run(tmp_path))
    assert server.server.server_address[0] == "127.0.0.1"
    token = server.server.token
    assert len(token) >= 32 and page_url(server.server) == f"http://127.0.0.1:{server.port}/?token={token}"
    assert server.get("/")[0] == 403
    assert server.get("/?token=" + "A" * len(token))[0] == 403
    assert server.get(f"/?token={token}", host=f"evil.example:{server.port}")[0] == 421
    assert server.get(f"/?token={token}", host=f"127.0.0.1.nip.io:{server.port}")[0] == 421
    assert server.get(f"/?token={token}", host="127.0.0.1:1")[0] == 421
    assert server.get(f"/?token={token}", host="")[0] == 421
    assert server.get(f"/other?token={token}")[0] == 404
    status, body = server.get(f"/?token={token}")
    assert status == 200 and "<!doctype html>" in body and "NaN" in decode_all(body)  # the problem page
    assert server.get(f"/?token={token}", host=f"localhost:{server.port}")[0] == 200
    assert make_server(lambda: "", 0).token != token  # a new token per start


def test_the_served_deep_json_is_the_problem_page_not_a_traceback(served, tmp_path):
    server = served(deep_run(tmp_path))
    status, body = server.get(f"/?token={server.server.token}")
    assert status == 200 and "nested too deeply" in decode_all(body)


def test_the_command_prints_the_url_with_its_token(tmp_path):
    run = nan_run(tmp_path)
    proc = subprocess.Popen(
        [str(SPU), "view", str(run), "--port", "0", "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        url = json.loads(proc.stdout.readline())["url"]
        match = re.fullmatch(r"http://127\.0\.0\.1:(\d+)/\?token=([A-Za-z0-9_-]{32,})", url)
        assert match, url
        conn = http.client.HTTPConnection("127.0.0.1", int(match.group(1)), timeout=30)
        conn.request("GET", url.split(match.group(1), 1)[1])
        response = conn.getresponse()
        assert response.status == 200 and response.getheader("Referrer-Policy") == "no-referrer"
        conn.close()
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    assert "Traceback" not in proc.stderr.read()


def _connection_errors(cls: type[BaseException] = ConnectionError) -> list[type[BaseException]]:
    return [cls, *(sub for direct in cls.__subclasses__() for sub in _connection_errors(direct))]


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(error=st.sampled_from(_connection_errors()), other=st.sampled_from([ValueError, OSError, KeyError]))
def test_a_dropped_connection_prints_nothing_and_other_errors_still_print(capfd, error, other):
    """A browser drops connections it opened (preconnects, a closed tab): the terminal stays quiet; an error
    of the server itself is still printed, as the standard library prints it."""
    server = make_server(lambda: "", 0)
    try:
        for exc, printed in ((error(), False), (other("the server's own"), True)):
            capfd.readouterr()
            try:
                raise exc
            except BaseException:
                server.handle_error(None, ("127.0.0.1", 1))
            assert ("Traceback" in capfd.readouterr().err) == printed, exc
    finally:
        server.server_close()


def test_a_client_that_resets_its_connection_leaves_no_traceback(served, tmp_path, capfd):
    server = served(nan_run(tmp_path))
    handled = threading.Event()
    original = server.server.handle_error

    def seen(request, address):
        try:
            original(request, address)
        finally:
            handled.set()

    server.server.handle_error = seen
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=30)
    sock.sendall(b"GET /?tok")  # part of a request line, then a reset (RST, not FIN)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()
    assert handled.wait(30), "the reset never reached the server"
    assert "Traceback" not in capfd.readouterr().err
    assert server.get(f"/?token={server.server.token}")[0] == 200  # and it serves on
