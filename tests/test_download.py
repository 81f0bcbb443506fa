"""``probing-lab download``: against a local HTTP server on 127.0.0.1 serving a tiny released-format pair."""

import hashlib
import json
import re
import socket
import struct
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import torch
from conftest import TINY_MODEL

from probing_lab.cli import main
from probing_lab.download import (
    MANIFEST,
    MODELS,
    URL_ENV,
    DownloadError,
    VerifyError,
    default_dir,
    download,
    model_urls,
    verify,
)
from probing_lab.elmo import ElmoBiLM, ElmoOptions, save_hdf5_weights

NAME = "small"


@pytest.fixture(autouse=True)
def local_only(monkeypatch):
    """No proxy, no default URL, and any connection to a host other than 127.0.0.1 fails the test."""
    for var in ("http_proxy", "https_proxy", "all_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", URL_ENV):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("no_proxy", "*")
    real = socket.create_connection

    def guarded(address, *args, **kwargs):
        assert address[0] == "127.0.0.1", f"the test tried to reach {address}"
        return real(address, *args, **kwargs)

    monkeypatch.setattr(socket, "create_connection", guarded)


@pytest.fixture(autouse=True)
def tiny_is_published(monkeypatch):
    """The tiny pair the server serves stands for every published ELMo (the real ones are 54 MB and up)."""
    import probing_lab.download

    monkeypatch.setattr(probing_lab.download, "expected_options", lambda name: ElmoOptions.from_dict(TINY_MODEL))


def tiny_pair(tmp_path, **lstm):
    """A random tiny ELMo saved in the released layout: (options.json bytes, weights.hdf5 bytes)."""
    data = json.loads(json.dumps(TINY_MODEL))
    data["lstm"].update(lstm)
    model = ElmoBiLM(ElmoOptions.from_dict(data))
    model.reset_parameters(torch.Generator().manual_seed(0))
    folder = tmp_path / "-".join(["source"] + [f"{k}{v}" for k, v in lstm.items()])
    folder.mkdir()
    model.options.save(folder / "options.json")
    save_hdf5_weights(model, folder / "weights.hdf5")
    return (folder / "options.json").read_bytes(), (folder / "weights.hdf5").read_bytes()


class Handler(BaseHTTPRequestHandler):
    """Serves ``server.files``; ``server.modes[path]`` (or ``server.mode``): normal, 404, drop (close after
    half the bytes), reset (the same with a TCP reset), truncate (Content-Length larger than the bytes sent),
    ignore-range (answer a Range request with the whole file)."""

    def log_message(self, *args):
        pass

    def do_GET(self):
        srv = self.server
        srv.requests.append((self.path, self.headers.get("Range")))
        data = srv.files.get(self.path)
        mode = srv.modes.pop(self.path, srv.mode)  # a per-path mode applies to one request
        if data is None or mode == "404":
            self.send_error(404)
            return
        start = 0
        requested = re.fullmatch(r"bytes=(\d+)-", self.headers.get("Range") or "")
        if requested and mode != "ignore-range":
            start = int(requested.group(1))
            if start >= len(data):
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{len(data)}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        else:
            self.send_response(200)
        body = data[start:]
        self.send_header("Content-Length", str(len(body) + (100 if mode == "truncate" else 0)))
        self.end_headers()
        if mode in ("drop", "reset"):
            body = body[: len(body) // 2]
        self.wfile.write(body)
        self.wfile.flush()
        if mode == "drop":
            self.connection.shutdown(socket.SHUT_RDWR)
        elif mode == "reset":
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.connection.close()
        self.close_connection = True


@pytest.fixture
def server(tmp_path):
    options, weights = tiny_pair(tmp_path)
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    srv.base = f"http://127.0.0.1:{srv.server_address[1]}/models/elmo/"
    srv.requests, srv.modes, srv.mode = [], {}, "normal"
    srv.blobs = {"options.json": options, "weights.hdf5": weights}
    srv.paths = {}  # (model, local file name) -> URL path
    srv.files = {}  # URL path -> bytes
    for name in MODELS:
        for local, url in model_urls(name, srv.base).items():
            path = urllib.parse.urlsplit(url).path
            srv.paths[name, local] = path
            srv.files[path] = srv.blobs[local]
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()
    thread.join()


def sha(data):
    return hashlib.sha256(data).hexdigest()


def test_urls_table_and_default_dir(monkeypatch, tmp_path):
    urls = model_urls("original-5.5b")
    assert urls["weights.hdf5"] == (
        "https://allennlp.s3.amazonaws.com/models/elmo/2x4096_512_2048cnn_2xhighway_5.5B/"
        "elmo_2x4096_512_2048cnn_2xhighway_5.5B_weights.hdf5"
    )
    assert model_urls("small", "http://mirror/x")["options.json"] == (
        "http://mirror/x/2x1024_128_2048cnn_1xhighway/elmo_2x1024_128_2048cnn_1xhighway_options.json"
    )
    monkeypatch.setenv(URL_ENV, "http://127.0.0.1:1/m/")
    assert model_urls("medium")["options.json"].startswith("http://127.0.0.1:1/m/2x2048_256_2048cnn_1xhighway/")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert default_dir("small") == tmp_path / "probing-lab" / "elmo" / "small"
    with pytest.raises(ValueError, match="choose one of small, medium, original, original-5.5b"):
        download("large", tmp_path)


def test_full_download_manifest_verify_and_nothing_to_do(server, tmp_path):
    target = tmp_path / "elmo"
    files = download(NAME, target, base_url=server.base, progress=False)
    assert files.fetched and files.options == target / "options.json" and files.weights == target / "weights.hdf5"
    for local, data in server.blobs.items():
        assert (target / local).read_bytes() == data
    assert not list(target.glob("*.part"))
    manifest = json.loads((target / MANIFEST).read_text())
    assert manifest["model"] == NAME and manifest["parameters"] > 0
    assert [(e["name"], e["size"], e["sha256"]) for e in manifest["files"]] == [
        (local, len(data), sha(data)) for local, data in server.blobs.items()
    ]
    assert manifest["files"][1]["url"] == server.base + server.paths[NAME, "weights.hdf5"].split("/models/elmo/")[1]
    assert verify(target) == manifest

    n = len(server.requests)
    again = download(NAME, target, base_url=server.base, progress=False)
    assert not again.fetched and len(server.requests) == n  # nothing fetched the second time


@pytest.mark.parametrize("mode", ["drop", "reset"])
def test_resume_after_dropped_connection(server, tmp_path, mode):
    weights_path = server.paths[NAME, "weights.hdf5"]
    server.modes[weights_path] = mode
    with pytest.raises(DownloadError, match=r"weights\.hdf5.*kept.*run the same command again to resume") as e:
        download(NAME, tmp_path, base_url=server.base, progress=False)
    part = tmp_path / "weights.hdf5.part"
    assert part.is_file() and part.stat().st_size < len(server.blobs["weights.hdf5"])
    assert mode == "reset" or part.stat().st_size > 0  # a reset may discard what was in flight
    assert str(part) in str(e.value)
    assert (tmp_path / "options.json").is_file() and not (tmp_path / "weights.hdf5").exists()
    assert not (tmp_path / MANIFEST).exists()

    kept = part.stat().st_size
    download(NAME, tmp_path, base_url=server.base, progress=False)
    assert server.requests[-1] == (weights_path, f"bytes={kept}-" if kept else None)  # resumed, not restarted
    assert sha((tmp_path / "weights.hdf5").read_bytes()) == sha(server.blobs["weights.hdf5"])
    assert not part.exists()
    verify(tmp_path)


def test_server_ignoring_range_starts_over_and_complete_part_is_used(server, tmp_path):
    (tmp_path / "weights.hdf5.part").write_bytes(b"junk that is not the start of the file")
    server.modes[server.paths[NAME, "weights.hdf5"]] = "ignore-range"
    download(NAME, tmp_path, base_url=server.base, progress=False)
    assert (tmp_path / "weights.hdf5").read_bytes() == server.blobs["weights.hdf5"]

    other = tmp_path / "other"
    other.mkdir()
    (other / "weights.hdf5.part").write_bytes(server.blobs["weights.hdf5"])  # complete but not renamed
    download(NAME, other, base_url=server.base, progress=False)  # the server answers 416: nothing left
    assert (other / "weights.hdf5").read_bytes() == server.blobs["weights.hdf5"]
    verify(other)


def test_404_names_the_url_and_model(server, tmp_path):
    server.mode = "404"
    url = server.base + server.paths[NAME, "options.json"].split("/models/elmo/")[1]
    with pytest.raises(DownloadError, match="404") as e:
        download(NAME, tmp_path, base_url=server.base, progress=False)
    assert url in str(e.value) and "'small'" in str(e.value)
    assert not (tmp_path / MANIFEST).exists()


def test_truncated_body_is_an_error_that_keeps_the_part(server, tmp_path):
    server.modes[server.paths[NAME, "weights.hdf5"]] = "truncate"
    with pytest.raises(DownloadError, match=r"weights\.hdf5: got \d[\d,]* of the [\d,]+ bytes") as e:
        download(NAME, tmp_path, base_url=server.base, progress=False)
    assert "resume" in str(e.value)
    assert (tmp_path / "weights.hdf5.part").is_file() and not (tmp_path / "weights.hdf5").exists()
    assert not (tmp_path / MANIFEST).exists()


def test_verify_catches_a_corrupted_byte(server, tmp_path):
    download(NAME, tmp_path, base_url=server.base, progress=False)
    weights = tmp_path / "weights.hdf5"
    data = bytearray(weights.read_bytes())
    data[len(data) // 2] ^= 0xFF
    weights.write_bytes(bytes(data))
    with pytest.raises(VerifyError, match=re.escape(str(weights)) + ": sha256 differs"):
        verify(tmp_path)
    with pytest.raises(VerifyError, match="weights.hdf5"):  # and download refuses, naming it
        download(NAME, tmp_path, base_url=server.base, progress=False)
    assert weights.read_bytes() == bytes(data)  # nothing deleted or replaced

    weights.unlink()  # what the error says to do: the file is fetched again, the manifest rewritten
    n = len(server.requests)
    assert download(NAME, tmp_path, base_url=server.base, progress=False).fetched
    assert [path for path, _ in server.requests[n:]] == [server.paths[NAME, "weights.hdf5"]]
    verify(tmp_path)


def test_invalid_pair_fails_validation_without_manifest(server, tmp_path):
    other_options, _ = tiny_pair(tmp_path, dim=32)  # lstm.dim 32 does not fit weights made with 16
    server.files[server.paths[NAME, "options.json"]] = other_options
    target = tmp_path / "elmo"
    with pytest.raises(VerifyError, match=re.escape(str(target / "weights.hdf5")) + ".*do not belong together") as e:
        download(NAME, target, base_url=server.base, progress=False)
    assert "no manifest was written" in str(e.value)
    assert not (target / MANIFEST).exists()
    assert not (target / "options.json").exists() and not (target / "weights.hdf5").exists()  # removed
    with pytest.raises(FileNotFoundError, match="no manifest"):
        verify(target)


def test_cli_download_and_errors(server, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(URL_ENV, server.base)
    target = tmp_path / "cli"
    assert main(["download", "small", "--dir", str(target)]) == 0
    out = capsys.readouterr().out
    assert f"--options {target / 'options.json'} --weights {target / 'weights.hdf5'}" in out
    verify(target)
    assert main(["download", "small", "--dir", str(target), "--quiet"]) == 0
    assert "nothing to do" in capsys.readouterr().out

    server.mode = "404"
    assert main(["download", "medium", "--dir", str(tmp_path / "m"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("probing-lab download: error: HTTP 404") and server.base in err

    with pytest.raises(SystemExit) as e:
        main(["download", "huge", "--dir", str(tmp_path / "h")])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert all(name in err for name in MODELS)


def test_model_page_downloads_with_a_progress_bar_and_fills_in_the_paths(server, tmp_path, monkeypatch):
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv(URL_ENV, server.base)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("PROBING_LAB_MODEL", "random:cpu-tiny")
    page = Path(__file__).resolve().parent.parent / "app" / "pages" / "8_Model.py"
    at = AppTest.from_file(str(page), default_timeout=120)
    at.run()
    at.radio(key="kind").set_value("Released ELMo (options.json + weights.hdf5)").run()
    at.selectbox(key="download_name").set_value("small").run()
    at.button(key="download").click().run()
    assert not at.exception, [e.value for e in at.exception]
    target = tmp_path / "cache" / "probing-lab" / "elmo" / "small"
    assert at.text_input(key="options").value == str(target / "options.json")
    assert at.text_input(key="weights").value == str(target / "weights.hdf5")
    verify(target)
