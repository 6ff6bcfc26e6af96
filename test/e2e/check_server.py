#!/usr/bin/env python3
"""helm-rt serve against its own single runs, through the official OpenAI client and raw HTTP.

Every server is started by this script on 127.0.0.1 with --port 0 (the port is read from its
first line) and stopped with SIGTERM, which must end it with status 0.

  1. The default model (its GGUF file compiled here): completions and chat, streaming and not,
     greedy; the text and ids equal `helm-rt --prompt-ids ... --temperature 0` on the same prompt
     ids (chat: the prompt Python's jinja2 renders from the package's template, tokenized by the
     Hugging Face `tokenizers` library); stop strings; usage counts.
  2. A corpus model without a tokenizer (prompts as ids): 16 clients at once, each its own
     prompt, with 4 KV slots: every client gets exactly its single run's tokens; the rest queued.
  3. A client that disconnects mid-stream: its slot is freed (metrics: active slots back to 0,
     a cancelled sequence, the KV bytes released).
  4. A full queue answers 503 with Retry-After; a prompt that can never fit answers 400.
  5. --api-key: 401 without or with a wrong key on every endpoint but /health.
  6. At least 30 malformed or hostile requests, each with its status; the server alive after.
  7. SIGTERM during a stream: the stream ends, the server exits 0.

  python check_server.py --helmc build/bin/helmc --helm-rt build/bin/helm-rt --root .
"""
from __future__ import annotations

import argparse
import concurrent.futures
import http.client
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

GGUF = "models/.cache/gguf/SmolLM2-135M-Instruct.Q4_1.gguf"
CORPUS_MODEL = "test/models/qwen3-kv-fp32/model.onnx"

results: list[tuple[bool, str]] = []


def check(ok: bool, what: str) -> bool:
    results.append((bool(ok), what))
    print(("PASS " if ok else "FAIL ") + what, flush=True)
    return bool(ok)


class Server:
    def __init__(self, helm_rt: str, package: str, *flags: str):
        self.proc = subprocess.Popen([helm_rt, "serve", package, "--port", "0", *flags],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        m = re.search(r"http://127\.0\.0\.1:(\d+)", line)
        if not m:
            err = self.proc.stderr.read() if self.proc.poll() is not None else ""
            self.proc.kill()
            raise RuntimeError(f"helm-rt serve did not start: {line.strip()} {err.strip()}")
        self.port = int(m.group(1))
        self.base = f"http://127.0.0.1:{self.port}"
        # Drain stderr so the server never blocks on a full pipe.
        self.stderr_lines: list[str] = []
        threading.Thread(target=lambda: self.stderr_lines.extend(self.proc.stderr), daemon=True).start()

    def request(self, method: str, path: str, body: bytes | str | None = None,
                headers: dict | None = None, timeout: float = 120) -> tuple[int, dict, bytes]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        if isinstance(body, str):
            body = body.encode()
        conn.request(method, path, body=body, headers=headers or {})
        r = conn.getresponse()
        data = r.read()
        hdrs = {k.lower(): v for k, v in r.getheaders()}
        conn.close()
        return r.status, hdrs, data

    def post(self, path: str, obj, headers: dict | None = None) -> tuple[int, dict, bytes]:
        h = {"Content-Type": "application/json", **(headers or {})}
        return self.request("POST", path, json.dumps(obj), h)

    def metrics(self) -> dict[str, float]:
        _, _, data = self.request("GET", "/metrics")
        out = {}
        for line in data.decode().splitlines():
            if line and not line.startswith("#"):
                name, value = line.rsplit(" ", 1)
                out[name] = float(value)
        return out

    def metrics_when(self, done, timeout: float, interval: float = 0.05) -> dict[str, float]:
        """The metrics once `done(metrics)` holds, or the last ones read after `timeout` seconds."""
        deadline = time.time() + timeout
        m = self.metrics()
        while time.time() < deadline and not done(m):
            time.sleep(interval)
            m = self.metrics()
        return m

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                return -999
        return self.proc.returncode


def single_run(helm_rt: str, package: str, ids: list[int], n: int, ignore_eos: bool = False,
               extra: tuple[str, ...] = ()) -> list[int]:
    cmd = [helm_rt, package, "--prompt-ids", ",".join(map(str, ids)), "-n", str(n),
           "--temperature", "0", "--emit-ids", "-q", *extra]
    if ignore_eos:
        cmd.append("--ignore-eos")
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"helm-rt failed: {r.stderr.strip()}")
    lines = [l for l in r.stdout.strip().splitlines() if l.strip()]
    return [int(t) for t in lines[-1].split(",")] if lines else []


def strip_eos(ids: list[int], eos: set[int]) -> list[int]:
    return ids[:-1] if ids and ids[-1] in eos else ids


def read_sse(resp) -> list[dict | str]:
    events = []
    for raw in resp:
        line = raw.decode().strip() if isinstance(raw, bytes) else raw.strip()
        if not line.startswith("data: "):
            continue
        payload = line[len("data: "):]
        events.append(payload if payload == "[DONE]" else json.loads(payload))
    return events


def test_default_model(args, tmp: Path) -> None:
    from openai import OpenAI
    import jinja2.sandbox
    from tokenizers import Tokenizer

    gguf = Path(args.root) / GGUF
    if not gguf.exists():
        check(False, f"default model: {gguf} missing (run scripts/fetch-default-model.py --gguf-only)")
        return
    pkg = str(tmp / "default.helmpkg")
    r = subprocess.run([args.helmc, str(gguf), "-q", "-o", pkg], capture_output=True, text=True)
    if not check(r.returncode == 0, f"helmc {GGUF}: {r.stderr.strip()}"):
        return
    tok_json = subprocess.run([args.helm_gguf_dump, str(gguf), "--tokenizer-json"], capture_output=True,
                              text=True, check=True).stdout
    tokenizer = Tokenizer.from_str(tok_json)
    # The template the GGUF file carries, read by the gguf package (not HELM's reader).
    import gguf as gguf_py
    field = gguf_py.GGUFReader(str(gguf)).get_field("tokenizer.chat_template")
    if not check(field is not None, f"default model: {GGUF} carries tokenizer.chat_template"):
        return
    template_text = field.contents()
    eos = {0, 2}

    server = Server(args.helm_rt, pkg, "--parallel", "2", "--shutdown-timeout", "1")
    try:
        client = OpenAI(base_url=server.base + "/v1", api_key="none", max_retries=0)
        models = client.models.list()
        check([m.id for m in models.data] == ["default"], f"/v1/models lists the package: {[m.id for m in models.data]}")

        # Completions: text prompt, greedy; reference: helm-rt on the same ids (encode with BOS as -p).
        prompt = "The capital of France is"
        ids = tokenizer.encode(prompt, add_special_tokens=True).ids
        want = strip_eos(single_run(args.helm_rt, pkg, ids, 24), eos)
        c = client.completions.create(model="default", prompt=prompt, max_tokens=24, temperature=0,
                                      extra_body={"return_token_ids": True})
        got = c.choices[0].model_extra.get("token_ids")
        check(got == want, f"completions: ids equal helm-rt's ({len(want)} tokens)")
        want_text = tokenizer.decode(want, skip_special_tokens=True)
        check(c.choices[0].text == want_text, f"completions: text equals the decoded ids: {c.choices[0].text!r}")
        check(c.usage.prompt_tokens == len(ids) and c.usage.completion_tokens == len(want)
              and c.usage.total_tokens == len(ids) + len(want),
              f"completions: usage {c.usage.prompt_tokens}/{c.usage.completion_tokens}/{c.usage.total_tokens}")
        check(c.choices[0].finish_reason == ("length" if len(want) == 24 else "stop"),
              f"completions: finish_reason {c.choices[0].finish_reason}")

        # The same as ids, streamed.
        stream = client.completions.create(model="default", prompt=ids, max_tokens=24, temperature=0,
                                           stream=True, stream_options={"include_usage": True})
        pieces, finish, usage = [], None, None
        for chunk in stream:
            if chunk.choices:
                pieces.append(chunk.choices[0].text)
                finish = chunk.choices[0].finish_reason or finish
            if chunk.usage:
                usage = chunk.usage
        check("".join(pieces) == want_text, f"completions stream: text equals non-streamed ({len(pieces)} chunks)")
        check(usage is not None and usage.completion_tokens == len(want), "completions stream: usage chunk")
        check(finish == c.choices[0].finish_reason, f"completions stream: finish_reason {finish}")

        # Stop string: the text is cut before it, finish_reason stop.
        if len(want_text) > 6:
            stop = want_text[3:6]
            s = client.completions.create(model="default", prompt=prompt, max_tokens=24, temperature=0, stop=[stop])
            check(s.choices[0].text == want_text[:want_text.find(stop)] and s.choices[0].finish_reason == "stop",
                  f"completions: stop {stop!r} cuts the text: {s.choices[0].text!r}")

        # Chat: the oracle renders with jinja2 as transformers does; ids through HF tokenizers.
        env = jinja2.sandbox.ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
        messages_list = [
            [{"role": "user", "content": "What is the capital of France?"}],
            [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Name a color."},
             {"role": "assistant", "content": "Blue."}, {"role": "user", "content": "Another, ünïcødé ✓"}],
        ]
        for k, messages in enumerate(messages_list):
            rendered = env.from_string(template_text).render(messages=messages, add_generation_prompt=True,
                                                             bos_token="<|im_start|>", eos_token="<|im_end|>")
            chat_ids = tokenizer.encode(rendered, add_special_tokens=False).ids
            want_chat = strip_eos(single_run(args.helm_rt, pkg, chat_ids, 32), eos)
            resp = client.chat.completions.create(model="default", messages=messages, max_tokens=32, temperature=0,
                                                  extra_body={"return_token_ids": True})
            check(resp.choices[0].model_extra.get("token_ids") == want_chat and resp.usage.prompt_tokens == len(chat_ids),
                  f"chat {k}: ids equal helm-rt's on the jinja2-rendered prompt ({len(want_chat)} tokens)")
            check(resp.choices[0].message.content == tokenizer.decode(want_chat, skip_special_tokens=True)
                  and resp.choices[0].message.role == "assistant",
                  f"chat {k}: content {resp.choices[0].message.content!r}")
            st = client.chat.completions.create(model="default", messages=messages, max_tokens=32, temperature=0,
                                                stream=True)
            text = "".join(ch.choices[0].delta.content or "" for ch in st if ch.choices)
            check(text == resp.choices[0].message.content, f"chat {k} stream: same content")

        test_disconnect(server, ids)
        test_disconnect_whole(server, ids)

        # Sampling with a seed is reproducible.
        a = client.completions.create(model="default", prompt=prompt, max_tokens=12, temperature=0.9, seed=7)
        b = client.completions.create(model="default", prompt=prompt, max_tokens=12, temperature=0.9, seed=7)
        check(a.choices[0].text == b.choices[0].text, "completions: the same seed gives the same sample")
        test_sigterm_mid_stream(server, ids)
    finally:
        check(server.stop() == 0, "default model: the server exited with status 0")


def compile_corpus(args, tmp: Path) -> str:
    pkg = str(tmp / "corpus.helmpkg")
    r = subprocess.run([args.helmc, str(Path(args.root) / CORPUS_MODEL), "-q", "-o", pkg],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"helmc {CORPUS_MODEL}: {r.stderr.strip()}")
    return pkg


def test_concurrency(args, pkg: str) -> None:
    prompts = [[(7 * i + 3 * j + 1) % 250 + 1 for j in range(3 + i % 9)] for i in range(16)]
    n = 20
    want = [single_run(args.helm_rt, pkg, p, n, ignore_eos=True) for p in prompts]
    server = Server(args.helm_rt, pkg, "--parallel", "4", "--queue", "32")
    try:
        def one(i: int):
            status, _, data = server.post("/v1/completions", {"prompt": prompts[i], "max_tokens": n, "temperature": 0,
                                                              "return_token_ids": True})
            return status, json.loads(data)
        with concurrent.futures.ThreadPoolExecutor(16) as pool:
            answers = list(pool.map(one, range(16)))
        same = sum(1 for i, (status, body) in enumerate(answers)
                   if status == 200 and body["choices"][0]["token_ids"] == want[i])
        check(same == 16, f"16 clients at once on 4 slots: {same}/16 got exactly their single run's tokens")
        # A slot is released right after its last chunk is sent, so the last one may still be held.
        m = server.metrics_when(lambda m: m.get("helm_active_slots") == 0, timeout=10)
        check(m.get("helm_sequences_admitted_total") == 16 and m.get("helm_active_slots") == 0
              and m.get("helm_queue_length") == 0 and m.get("helm_slots") == 4,
              f"metrics after the 16: admitted {m.get('helm_sequences_admitted_total')}, "
              f"active {m.get('helm_active_slots')}, queued {m.get('helm_queue_length')}")

        # Streams: the same 16 as server-sent events.
        def streamed(i: int):
            conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=120)
            conn.request("POST", "/v1/completions", json.dumps({"prompt": prompts[i], "max_tokens": n,
                                                               "temperature": 0, "stream": True,
                                                               "return_token_ids": True}),
                         {"Content-Type": "application/json"})
            resp = conn.getresponse()
            events = read_sse(resp)
            conn.close()
            return resp.status, events
        with concurrent.futures.ThreadPoolExecutor(16) as pool:
            streams = list(pool.map(streamed, range(16)))
        ended = sum(1 for i, (status, ev) in enumerate(streams) if status == 200 and ev and ev[-1] == "[DONE]"
                    and ev[-2]["choices"][0]["finish_reason"] == "length"
                    and [t for e in ev[:-1] for t in e["choices"][0].get("token_ids", [])] == want[i])
        check(ended == 16, f"16 streams at once: {ended}/16 streamed their single run's ids and ended with "
                           "finish_reason length and [DONE]")
    finally:
        check(server.stop() == 0, "concurrency server: SIGTERM, status 0")


def open_completion(server: Server, body: dict) -> socket.socket:
    """A raw connection that has sent one POST /v1/completions (the test then reads or closes it)."""
    sock = socket.create_connection(("127.0.0.1", server.port))
    data = json.dumps(body)
    sock.sendall((f"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  f"Content-Length: {len(data)}\r\n\r\n{data}").encode())
    return sock


def idle(metrics: dict[str, float]) -> bool:
    return metrics.get("helm_active_slots", 1) == 0


def test_disconnect(server: Server, prompt_ids: list[int]) -> None:
    """A client that goes away mid-stream: its sequence is cancelled and its slot freed."""
    # The previous request's client has its [DONE], but the server frees that slot just after
    # sending it: wait for it, so `before` counts no KV bytes of another sequence.
    before = server.metrics_when(idle, 20)
    sock = open_completion(server, {"prompt": prompt_ids, "max_tokens": 100000, "temperature": 0.5, "stream": True,
                                    "return_token_ids": True})
    got = b""
    sock.settimeout(60)
    while got.count(b"data: ") < 3:
        more = sock.recv(4096)
        if not more:
            break
        got += more
    # The metrics are the scheduler's snapshot at the end of a step, which can lag the stream's
    # events on a loaded machine: wait (the stream goes on) for one that shows this sequence.
    during = server.metrics_when(
        lambda m: m.get("helm_active_slots") == 1 and m.get("helm_kv_bytes", 0) > before.get("helm_kv_bytes", 0),
        10, 0.02)
    sock.close()
    after = server.metrics_when(idle, 20)
    check(during.get("helm_active_slots") == 1 and during.get("helm_kv_bytes", 0) > before.get("helm_kv_bytes", 0),
          f"mid-stream: 1 active slot holding {during.get('helm_kv_bytes')} KV bytes")
    check(after.get("helm_active_slots") == 0
          and after.get("helm_sequences_cancelled_total", 0) == before.get("helm_sequences_cancelled_total", 0) + 1
          and after.get("helm_kv_bytes", 1) == 0,
          f"after the disconnect: active {after.get('helm_active_slots')}, cancelled "
          f"{after.get('helm_sequences_cancelled_total')}, KV bytes {after.get('helm_kv_bytes')}")


def test_disconnect_whole(server: Server, prompt_ids: list[int]) -> None:
    """A client that goes away while waiting for a non-streaming answer (nothing is written to it
    until the end): the server notices within a second, cancels the sequence and frees the slot,
    long before the answer would have been done."""
    before = server.metrics()
    sock = open_completion(server, {"prompt": prompt_ids, "max_tokens": 100000, "temperature": 0.5, "ignore_eos": True})
    # Generating: the slot is taken and tokens are being made.
    during = server.metrics_when(
        lambda m: m.get("helm_active_slots") == 1
        and m.get("helm_generated_tokens_total", 0) >= before.get("helm_generated_tokens_total", 0) + 16, 30, 0.02)
    sock.close()
    closed = time.time()
    after = server.metrics_when(idle, 20, 0.02)
    freed_after = time.time() - closed
    generated = during.get("helm_generated_tokens_total", 0) - before.get("helm_generated_tokens_total", 0)
    kv_bytes = after.get("helm_kv_bytes", -1)
    check(during.get("helm_active_slots") == 1, f"non-streaming: generating in 1 slot ({generated:.0f} tokens before the close)")
    check(after.get("helm_active_slots") == 0 and freed_after < 3
          and after.get("helm_sequences_cancelled_total", 0) == before.get("helm_sequences_cancelled_total", 0) + 1
          and after.get("helm_requests_client_gone_total", 0) == before.get("helm_requests_client_gone_total", 0) + 1
          and kv_bytes == 0,
          f"non-streaming client gone: slot freed {freed_after:.2f} s after the close, cancelled "
          f"{after.get('helm_sequences_cancelled_total')}, client gone {after.get('helm_requests_client_gone_total')}, "
          f"KV bytes {kv_bytes}")


def test_split(args, tmp: Path) -> None:
    """A split package on the emulated GPU with a paged KV cache of 16-position pages: prompts of
    several pages are prefilled a page per step, and 8 clients on 4 slots each get their single
    run's ids; every page is given back when they finish."""
    pkg = str(tmp / "split.helmpkg")
    r = subprocess.run([args.helmc, str(Path(args.root) / CORPUS_MODEL), "-q", "-o", pkg,
                        "--target=emu:rtx4060-laptop", "--force-split=1"], capture_output=True, text=True)
    if not check(r.returncode == 0, f"helmc --target=emu:rtx4060-laptop --force-split=1: {r.stderr.strip()}"):
        return
    prompts = [[(11 * i + 5 * j + 2) % 250 + 1 for j in range(5 + 9 * i)] for i in range(8)]
    n = 24
    want = [single_run(args.helm_rt, pkg, p, n, ignore_eos=True, extra=("--kv-page", "16")) for p in prompts]
    server = Server(args.helm_rt, pkg, "--parallel", "4", "--kv-page", "16")
    try:
        def one(i: int):
            status, _, data = server.post("/v1/completions", {"prompt": prompts[i], "max_tokens": n, "temperature": 0,
                                                              "ignore_eos": True, "return_token_ids": True})
            return status, json.loads(data)
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            answers = list(pool.map(one, range(8)))
        same = sum(1 for i, (status, body) in enumerate(answers)
                   if status == 200 and body["choices"][0]["token_ids"] == want[i])
        check(same == 8, f"split package, paged KV (16 positions a page), prompts of 5-68 tokens: "
                         f"{same}/8 clients on 4 slots got their single run's ids")
        m = server.metrics()
        check(m.get("helm_kv_page_tokens") == 16 and m.get("helm_kv_pages_in_use") == 0
              and m.get("helm_active_slots") == 0,
              f"split package: page size {m.get('helm_kv_page_tokens')}, pages in use after {m.get('helm_kv_pages_in_use')}")
    finally:
        check(server.stop() == 0, "split server: SIGTERM, status 0")


def test_limits(args, pkg: str) -> None:
    # One slot, no queue: while one long request runs, another gets 503 with Retry-After.
    server = Server(args.helm_rt, pkg, "--parallel", "1", "--queue", "0", "--ctx-per-slot", "64")
    try:
        long_body = {"prompt": [1, 2, 3], "max_tokens": 60, "temperature": 0.7}
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            futures = [pool.submit(server.post, "/v1/completions", long_body) for _ in range(4)]
            answers = [f.result() for f in futures]
        statuses = sorted(a[0] for a in answers)
        busy = [a for a in answers if a[0] == 503]
        check(statuses.count(200) >= 1 and busy and all(a[1].get("retry-after") for a in busy),
              f"one slot, no queue, 4 at once: statuses {statuses}, 503s carry Retry-After")
        status, _, data = server.post("/v1/completions", {"prompt": list(range(1, 70)), "max_tokens": 1})
        check(status == 400 and "at most 64 positions" in data.decode(),
              f"a prompt longer than the slot: {status} {data.decode()[:120]}")
        # With no queue, a slot still held by the last request's clean-up would answer 503.
        server.metrics_when(lambda m: m.get("helm_active_slots") == 0, timeout=10)
        status, _, data = server.post("/v1/completions", {"prompt": [1, 2, 3], "max_tokens": 1000, "temperature": 0,
                                                          "return_token_ids": True})
        body = json.loads(data)
        total = body.get("usage", {}).get("total_tokens")
        check(status == 200 and body["choices"][0]["finish_reason"] == "length" and total <= 64,
              f"max_tokens past the slot: cut at the slot's end ({total} positions, length; status {status})")
    finally:
        check(server.stop() == 0, "limits server: SIGTERM, status 0")

    # --api-key: every endpoint but /health.
    server = Server(args.helm_rt, pkg, "--api-key", "s3cret")
    try:
        ok = True
        for path, method in [("/v1/models", "GET"), ("/metrics", "GET"), ("/v1/completions", "POST")]:
            for hdr in [{}, {"Authorization": "Bearer wrong"}, {"Authorization": "s3cret"}]:
                status, _, _ = server.request(method, path, "{}" if method == "POST" else None, hdr)
                ok &= status == 401
        status_health, _, _ = server.request("GET", "/health")
        status_ok, _, _ = server.request("GET", "/v1/models", None, {"Authorization": "Bearer s3cret"})
        check(ok and status_health == 200 and status_ok == 200,
              f"--api-key: 401 without the key on every endpoint, /health {status_health}, with the key {status_ok}")
    finally:
        check(server.stop() == 0, "api-key server: SIGTERM, status 0")


BAD_REQUESTS = [
    # (what, method, path, body, headers, expected status)
    ("body not JSON", "POST", "/v1/completions", "{not json", None, 400),
    ("empty body", "POST", "/v1/completions", "", None, 400),
    ("body a list", "POST", "/v1/completions", "[]", None, 400),
    ("body a string", "POST", "/v1/completions", '"hi"', None, 400),
    ("no prompt", "POST", "/v1/completions", {"max_tokens": 4}, None, 400),
    ("prompt a number", "POST", "/v1/completions", {"prompt": 5}, None, 400),
    ("prompt empty list", "POST", "/v1/completions", {"prompt": []}, None, 400),
    ("prompt list of strings", "POST", "/v1/completions", {"prompt": ["a", "b"]}, None, 400),
    ("prompt ids with a float", "POST", "/v1/completions", {"prompt": [1, 2.5]}, None, 400),
    ("prompt id negative", "POST", "/v1/completions", {"prompt": [1, -3]}, None, 400),
    ("prompt id past the vocabulary", "POST", "/v1/completions", {"prompt": [1, 10**9]}, None, 400),
    ("prompt id 2^64", "POST", "/v1/completions", '{"prompt": [18446744073709551616]}', None, 400),
    ("prompt text without a tokenizer", "POST", "/v1/completions", {"prompt": "hello"}, None, 400),
    ("max_tokens 0", "POST", "/v1/completions", {"prompt": [1], "max_tokens": 0}, None, 400),
    ("max_tokens a string", "POST", "/v1/completions", {"prompt": [1], "max_tokens": "5"}, None, 400),
    ("max_tokens huge", "POST", "/v1/completions", {"prompt": [1], "max_tokens": 10**30}, None, 400),
    ("temperature negative", "POST", "/v1/completions", {"prompt": [1], "temperature": -1}, None, 400),
    ("temperature NaN", "POST", "/v1/completions", '{"prompt": [1], "temperature": NaN}', None, 400),
    ("top_p 0", "POST", "/v1/completions", {"prompt": [1], "top_p": 0}, None, 400),
    ("top_k negative", "POST", "/v1/completions", {"prompt": [1], "top_k": -2}, None, 400),
    ("seed a string", "POST", "/v1/completions", {"prompt": [1], "seed": "x"}, None, 400),
    ("n = 2", "POST", "/v1/completions", {"prompt": [1], "n": 2}, None, 400),
    ("logprobs", "POST", "/v1/completions", {"prompt": [1], "logprobs": 5}, None, 400),
    ("stop a number", "POST", "/v1/completions", {"prompt": [1], "stop": 3}, None, 400),
    ("five stop strings", "POST", "/v1/completions", {"prompt": [1], "stop": ["a", "b", "c", "d", "e"]}, None, 400),
    ("stop without a tokenizer", "POST", "/v1/completions", {"prompt": [1], "stop": "x"}, None, 400),
    ("stream a string", "POST", "/v1/completions", {"prompt": [1], "stream": "yes"}, None, 400),
    ("messages on completions", "POST", "/v1/completions", {"prompt": [1], "messages": []}, None, 400),
    ("chat without messages", "POST", "/v1/chat/completions", {"max_tokens": 3}, None, 400),
    ("chat messages not a list", "POST", "/v1/chat/completions", {"messages": "hi"}, None, 400),
    ("chat message without role", "POST", "/v1/chat/completions", {"messages": [{"content": "x"}]}, None, 400),
    ("chat unknown role", "POST", "/v1/chat/completions", {"messages": [{"role": "wizard", "content": "x"}]}, None, 400),
    ("chat content a number", "POST", "/v1/chat/completions", {"messages": [{"role": "user", "content": 7}]}, None, 400),
    ("chat image part", "POST", "/v1/chat/completions",
     {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]}, None, 400),
    ("chat without a template (corpus model)", "POST", "/v1/chat/completions",
     {"messages": [{"role": "user", "content": "x"}]}, None, 400),
    ("nesting 10000 deep", "POST", "/v1/completions", '{"prompt": ' + "[" * 10000 + "]" * 10000 + "}", None, 400),
    ("body over --max-body", "POST", "/v1/completions", '{"prompt": "' + "a" * 70000 + '"}', None, 413),
    ("unknown endpoint", "GET", "/v1/engines", None, None, 404),
    ("unknown endpoint with a quote", "GET", "/v1/%22x%0A", None, None, 404),
    ("GET on completions", "GET", "/v1/completions", None, None, 405),
    ("invalid UTF-8 in a string", "POST", "/v1/completions", b'{"prompt": "\xff\xfe"}', None, 400),
]


def test_bad_requests(args, pkg: str) -> None:
    server = Server(args.helm_rt, pkg, "--max-body", "64KiB")
    try:
        rows = []
        for what, method, path, body, headers, expected in BAD_REQUESTS:
            if isinstance(body, (dict, list)):
                body = json.dumps(body)
            h = {"Content-Type": "application/json", **(headers or {})}
            try:
                status, _, data = server.request(method, path, body, h, timeout=30)
                shape = True
                if status >= 400 and data:
                    err = json.loads(data).get("error", {})
                    shape = isinstance(err.get("message"), str) and bool(err["message"])
            except Exception as e:  # noqa: BLE001 - a dropped connection is a failure to report
                status, shape, data = -1, False, str(e).encode()
            rows.append((what, expected, status, shape))
        print(f"{'request':42} {'want':>5} {'got':>5}")
        for what, expected, status, shape in rows:
            print(f"{what:42} {expected:>5} {status:>5}{'' if shape else '  (no OpenAI error JSON)'}")
        good = sum(1 for _, e, s, shape in rows if e == s and shape)
        check(good == len(rows) and len(rows) >= 30, f"bad requests: {good}/{len(rows)} answered with their status "
                                                     "and an OpenAI error body")
        # A body without a Content-Length (chunked) is refused before it is read: --max-body
        # could not bound it.
        sock = socket.create_connection(("127.0.0.1", server.port), timeout=30)
        sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Transfer-Encoding: chunked\r\n\r\n5\r\n{\"a\":\r\n")
        answer = sock.recv(4096)
        sock.close()
        check(answer.startswith(b"HTTP/1.1 411"), f"a chunked body: {answer.splitlines()[0] if answer else b''!r}")
        m = server.metrics()
        labels = [k for k in m if k.startswith("helm_requests_total")]
        check(all(re.search(r'endpoint="(/v1/completions|/v1/chat/completions|/v1/models|/health|/metrics|other)"', k)
                  for k in labels) and any('endpoint="other",status="404"' in k for k in labels),
              f"metrics label unknown paths 'other': {len(labels)} series")
        status, _, _ = server.request("GET", "/health")
        alive = server.post("/v1/completions", {"prompt": [1, 2], "max_tokens": 2})[0]
        check(status == 200 and alive == 200, "the server is alive after the bad requests")
    finally:
        check(server.stop() == 0, "bad-request server: SIGTERM, status 0")


def test_sigterm_mid_stream(server: Server, prompt_ids: list[int]) -> None:
    """SIGTERM while a long stream runs (the default model, --shutdown-timeout 1): the sequence is
    cut, its stream still ends with a finish chunk and [DONE], and the server exits 0."""
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=120)
    conn.request("POST", "/v1/completions", json.dumps({"prompt": prompt_ids, "max_tokens": 2000, "ignore_eos": True,
                                                       "temperature": 0.5, "stream": True}),
                 {"Content-Type": "application/json"})
    resp = conn.getresponse()
    first = resp.readline()
    t0 = time.time()
    code = server.stop()
    events = [e for e in [first.decode().strip()] + [line.strip() for line in resp.read().decode().splitlines()] if e]
    chunks = [json.loads(e[6:]) for e in events if e.startswith("data: {")]
    finish = [c["choices"][0]["finish_reason"] for c in chunks if c["choices"] and c["choices"][0]["finish_reason"]]
    check(code == 0 and events[-1] == "data: [DONE]" and finish == ["length"] and len(chunks) < 2000,
          f"SIGTERM mid-stream: exit {code}, cut after {len(chunks) - 1} of 2000 tokens, finish {finish}, "
          f"[DONE] {events[-1] == 'data: [DONE]'}, {time.time() - t0:.1f} s")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--helmc", required=True)
    ap.add_argument("--helm-rt", required=True)
    ap.add_argument("--helm-gguf-dump", required=True)
    ap.add_argument("--root", required=True)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="helm-serve-") as d:
        tmp = Path(d)
        try:
            pkg = compile_corpus(args, tmp)
            test_bad_requests(args, pkg)
            test_limits(args, pkg)
            test_concurrency(args, pkg)
            test_split(args, tmp)
            test_default_model(args, tmp)
        except Exception as e:  # noqa: BLE001 - report and fail rather than hang the suite
            check(False, f"unexpected error: {type(e).__name__}: {e}")
    failed = [w for ok, w in results if not ok]
    print(f"\n{len(results) - len(failed)}/{len(results)} checks passed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
