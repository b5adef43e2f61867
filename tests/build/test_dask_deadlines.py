"""`--executor dask --scheduler ADDR` against a port that is not a Dask scheduler (issue 32, point 8): a port that
accepts and stays silent hung the build, one that speaks HTTP gave a MemoryError traceback. Each is now one
sentence and exit 2, within the connection deadline."""
from __future__ import annotations

import os
import socket
import threading
import time

import pytest
from support.bounded_run import run_mmbu
from support.build_repo import make_repo

from mmbu.build.executors import (DASK_CONNECT_TIMEOUT_ENV, DASK_CONNECT_TIMEOUT_S, ExecutorError,
                                  dask_connect_timeout)


@pytest.fixture
def impostor(request):
    """A port on this machine that accepts connections and then stays silent, or answers like an HTTP server."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    held: list[socket.socket] = []

    def serve() -> None:
        while True:
            try:
                connection, _ = listener.accept()
            except OSError:
                return
            held.append(connection)
            if request.param == "http":
                connection.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")

    threading.Thread(target=serve, daemon=True).start()
    yield request.param, f"tcp://127.0.0.1:{listener.getsockname()[1]}"
    listener.close()
    for connection in held:
        connection.close()


@pytest.mark.parametrize("impostor", ["silent", "http"], indirect=True)
def test_a_port_that_is_not_a_dask_scheduler_is_one_sentence_and_exit_2(tmp_path, impostor):
    kind, address = impostor
    manifests = make_repo(tmp_path)
    started = time.monotonic()

    result = run_mmbu("build", "--manifests", manifests, "--data", tmp_path / "data", "--executor", "dask",
                      "--scheduler", address, cwd=tmp_path, env={**os.environ, DASK_CONNECT_TIMEOUT_ENV: "1.5"})

    assert time.monotonic() - started < 1.5 + 30
    assert result.returncode == 2 and "Traceback" not in result.output, result.output[-2000:]
    errors = [line for line in result.stderr.splitlines() if line.startswith("Error:")]
    expected = {"silent": f"Error: the Dask scheduler at {address} did not answer within 1.5 s (the port accepts "
                          "connections but sends no Dask handshake: is it the scheduler's port, usually 8786?)",
                "http": f"Error: {address} does not speak Dask's protocol (it opened with 'HTTP/1.1'); give the "
                        "scheduler's address, e.g. tcp://127.0.0.1:8786, not its dashboard's"}
    assert errors == [expected[kind]]



@pytest.mark.parametrize("value", ["soon", "0", "-3", "inf", "nan"])
def test_a_connect_timeout_that_is_not_seconds_is_one_sentence(monkeypatch, value):
    """The same ExecutorError as above, so `mmbu build` prints it as one sentence and exits 2."""
    monkeypatch.setenv(DASK_CONNECT_TIMEOUT_ENV, value)
    with pytest.raises(ExecutorError) as refused:
        dask_connect_timeout()
    assert str(refused.value) == f"MMBU_DASK_CONNECT_TIMEOUT={value!r}: expected a number of seconds above 0, e.g. 30"


def test_the_connect_timeout_is_ten_seconds_unless_set(monkeypatch):
    monkeypatch.delenv(DASK_CONNECT_TIMEOUT_ENV, raising=False)
    assert dask_connect_timeout() == DASK_CONNECT_TIMEOUT_S == 10.0
    monkeypatch.setenv(DASK_CONNECT_TIMEOUT_ENV, " 45 ")
    assert dask_connect_timeout() == 45.0
