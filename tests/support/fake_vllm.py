"""A stand-in for `vllm serve`, for the tests of behaviour that is the gate's and not vLLM's
(docs/testing.md, "Which tests start which servers"): the gate launches it exactly as it
launches vLLM (`vllm serve MODEL --port ... --served-model-name ...` through the `vllm`
package of tests/fixtures/fake_vllm, first on the server's PYTHONPATH), and it is healthy in
about a second.

What it does as vLLM does:

- an engine loop: every step (FAKE_VLLM_STEP_MS of sleep, the device's time) gives each
  running request its next token, so a stream really streams, one chunk per step, and time
  per output token is the step's; a step that holds guided rows also calls the package's
  `vllm.v1.structured_output.utils.apply_grammar_bitmask`, which burns FAKE_VLLM_GUIDED_STEP_MS
  of CPU (host work a profile sees; a commit of the bisect tests' repository adds more);
- guided requests (`response_format` json_schema or `structured_outputs.json`) get a small
  valid instance of their own schema (gate.plan.bounding.smallest_output), `stop`; free ones
  `max_tokens` tokens, `length`; a field vLLM no longer reads (`guided_json`) is ignored;
- the SSE chunk format, the usage chunk and [DONE] (support/openai_stream.py), /health,
  /v1/models, and /metrics with the histograms gate/measure/server_metrics.py reads (queue
  time holds the wait for a grammar, prefill the wait for the first token);
- its log on stdout, in vLLM's format, with the lines the gate reads (gate/runner/probes.py):
  the version, the model runner as VLLM_USE_V2_MODEL_RUNNER picks it (unset: the CPU build's
  fallback to V1), the engine core's torch threads as vLLM sets them (OMP_NUM_THREADS honoured,
  capped at the host's cores), from a child process titled VLLM::EngineCore that lives as
  long as the server (so that stopping it means stopping a process group, as with vLLM);
- a model folder is loaded: config.json read, every *.safetensors header parsed; corrupt
  weights end the server with a traceback before it is healthy.

Knobs, from the environment (all optional): FAKE_VLLM_STEP_MS (default 4),
FAKE_VLLM_GUIDED_STEP_MS (0), FAKE_VLLM_FIRST_TOKEN_MS (0: prefill), FAKE_VLLM_COMPILE_MS (0:
a guided request's wait for its grammar) with FAKE_VLLM_COMPILE_WHEN `every` grammar (default),
`miss` (one this server has not compiled) or `first` (the first after start), FAKE_VLLM_START_S
(0: seconds before it listens), FAKE_VLLM_EXIT_AFTER (SIGKILL itself when that many chat
requests have arrived), FAKE_VLLM_HOLD_BACK (1: tokens written at once; more is a server that
holds its output back), FAKE_VLLM_DIE_AT_START (a message: the server dies before it listens,
as a build that does not import does, that message the last line of its traceback),
FAKE_VLLM_REFUSE (a message: the build refuses the plan at start-up as vLLM's configuration
check does, e.g. `Model Runner V2 does not yet support: ...`: a ValueError with that message in
a pydantic dataclass's check, not caught, after the version line), FAKE_VLLM_INVALID_TITLE (a
schema's `title`: the guided outputs of requests guided by a schema of that title leave out
its last required property: JSON that does not follow its own schema).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from aiohttp import web
from prometheus_client import CollectorRegistry, Histogram, generate_latest
from pydantic.dataclasses import dataclass as pydantic_dataclass

from gate.plan.bounding import NoInstance, smallest_output
from support.openai_stream import chunk, open_stream, role_chunk, stream_app, usage_tail

COMPILE_WHEN = ("every", "miss", "first")
CHARS_PER_TOKEN = 2
# The engine core's stand-in, titled as vLLM titles it. It lives until it is signalled, as a
# process group's member must be stopped (so a gate that stopped the leader alone leaves it
# behind, and a test sees that), and an orphan goes by itself after ORPHAN_S.
ORPHAN_S = 90
ENGINE_CORE = (
    "import os, sys, time, setproctitle\n"
    "setproctitle.setproctitle('VLLM::EngineCore')\n"
    "parent = int(sys.argv[1])\n"
    "while os.getppid() == parent:\n"
    "    time.sleep(0.5)\n"
    f"time.sleep({ORPHAN_S})\n"
)


@dataclass(frozen=True)
class Knobs:
    step_s: float = 0.004
    guided_step_ms: float = 0.0
    first_token_s: float = 0.0
    compile_s: float = 0.0
    compile_when: str = "every"
    start_s: float = 0.0
    exit_after: int | None = None
    hold_back: int = 1
    invalid_title: str | None = None

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Knobs:
        def number(name: str, default: float) -> float:
            return float(env.get(f"FAKE_VLLM_{name}", default))

        when = env.get("FAKE_VLLM_COMPILE_WHEN", "every")
        if when not in COMPILE_WHEN:
            raise SystemExit(f"FAKE_VLLM_COMPILE_WHEN={when!r}: use {', '.join(COMPILE_WHEN)}")
        exit_after = env.get("FAKE_VLLM_EXIT_AFTER")
        return cls(step_s=number("STEP_MS", 4) / 1000, guided_step_ms=number("GUIDED_STEP_MS", 0),
                   first_token_s=number("FIRST_TOKEN_MS", 0) / 1000,
                   compile_s=number("COMPILE_MS", 0) / 1000, compile_when=when,
                   start_s=number("START_S", 0), hold_back=max(1, int(number("HOLD_BACK", 1))),
                   exit_after=int(exit_after) if exit_after else None,
                   invalid_title=env.get("FAKE_VLLM_INVALID_TITLE") or None)


def log(role: str, pid: int, level: str, where: str, message: str) -> None:
    """One line as vLLM logs it: `(EngineCore pid=12) INFO 12-01 16:19:11 [core.py:133] ...`."""
    print(f"({role} pid={pid}) {level} {time.strftime('%m-%d %H:%M:%S')} [{where}] {message}",
          flush=True)


def request_schema(body: dict) -> dict | None:
    """The JSON schema a request is guided by, in the two fields vLLM reads."""
    response_format = body.get("response_format") or {}
    if response_format.get("type") == "json_schema":
        return (response_format.get("json_schema") or {}).get("schema")
    return (body.get("structured_outputs") or {}).get("json")


@dataclass
class Sequence:
    """A running request: its tokens and the queue the engine loop feeds them into."""

    tokens: list[str]
    guided: bool
    sent: int = 0
    out: asyncio.Queue[str] = field(default_factory=asyncio.Queue)


class Metrics:
    """vLLM's request histograms (the three gate/measure/server_metrics.py reads)."""

    def __init__(self, model: str):
        self.registry = CollectorRegistry()
        self.model = model

        def histogram(name: str, doc: str) -> Histogram:
            return Histogram(name, doc, ["model_name"], registry=self.registry)

        self.queue = histogram("vllm:request_queue_time_seconds", "queued to first scheduled")
        self.prefill = histogram("vllm:request_prefill_time_seconds", "scheduled to first token")
        self.ttft = histogram("vllm:time_to_first_token_seconds", "arrival to first token")

    def observe(self, arrived: float, scheduled: float, first_token: float) -> None:
        self.queue.labels(self.model).observe(scheduled - arrived)
        self.prefill.labels(self.model).observe(first_token - scheduled)
        self.ttft.labels(self.model).observe(first_token - arrived)

    async def handle(self, request: web.Request) -> web.Response:
        return web.Response(body=generate_latest(self.registry), content_type="text/plain")


class Engine:
    """The engine loop and the grammar cache: one token per running sequence a step."""

    def __init__(self, knobs: Knobs):
        from vllm.v1.structured_output import request, utils  # the package under test

        self.knobs, self.utils, self.request = knobs, utils, request
        self.running: list[Sequence] = []
        self.work = asyncio.Event()
        self.compiled: set[str] = set()
        self.arrived = 0

    async def loop(self) -> None:
        while True:
            await self.work.wait()
            await asyncio.sleep(self.knobs.step_s)
            guided = sum(s.guided for s in self.running)
            if guided:
                self.utils.apply_grammar_bitmask(guided, self.knobs.guided_step_ms)
            for seq in list(self.running):
                seq.out.put_nowait(seq.tokens[seq.sent])
                seq.sent += 1
                if seq.sent == len(seq.tokens):
                    self.running.remove(seq)
            if not self.running:
                self.work.clear()

    def admit(self, seq: Sequence) -> None:
        self.running.append(seq)
        self.work.set()

    def drop(self, seq: Sequence) -> None:
        if seq in self.running:
            self.running.remove(seq)

    async def compile(self, key: str) -> None:
        """The wait for a request's grammar, as FAKE_VLLM_COMPILE_WHEN says."""
        first, new = not self.compiled, key not in self.compiled
        self.compiled.add(key)
        when = self.knobs.compile_when
        if when == "every" or (when == "miss" and new) or (when == "first" and first):
            await asyncio.sleep(self.knobs.compile_s)

    def arrive(self) -> None:
        self.arrived += 1
        if self.knobs.exit_after is not None and self.arrived >= self.knobs.exit_after:
            os.kill(os.getpid(), signal.SIGKILL)  # as the kernel's OOM killer would


@functools.lru_cache(maxsize=4096)
def guided_output(key: str) -> list[str] | str:
    """The tokens of a small valid instance of the schema `key` names (its JSON), or why
    there is none; cached, as a grammar is: building one validates it, milliseconds that
    would otherwise stall every stream."""
    try:
        text = smallest_output(json.loads(key))
    except NoInstance as exc:
        return f"the grammar of this schema cannot be built: {exc}"
    return [text[i:i + CHARS_PER_TOKEN] for i in range(0, len(text), CHARS_PER_TOKEN)]


@functools.lru_cache(maxsize=64)
def invalid_output(key: str) -> list[str] | str:
    """The tokens of the smallest instance of schema `key` without its last required
    property: JSON, but not of its schema (FAKE_VLLM_INVALID_TITLE)."""
    schema = json.loads(key)
    required = list(schema.get("required") or [])
    if not required:
        return f"FAKE_VLLM_INVALID_TITLE: schema {schema.get('title')!r} requires no property"
    text = json.dumps({k: v for k, v in json.loads(smallest_output(schema)).items()
                       if k != required[-1]}, separators=(",", ":"))
    return [text[i:i + CHARS_PER_TOKEN] for i in range(0, len(text), CHARS_PER_TOKEN)]


def tokens_for(body: dict, schema: dict | None, key: str,
               invalid_title: str | None = None) -> tuple[list[str], str] | str:
    """(tokens, finish reason), or why the request is refused."""
    limit = int(body.get("max_tokens") or 16)
    if schema is None:
        return [f" t{i}" for i in range(limit)], "length"
    broken = invalid_title is not None and schema.get("title") == invalid_title
    tokens = invalid_output(key) if broken else guided_output(key)
    if isinstance(tokens, str):
        return tokens
    return (tokens, "stop") if len(tokens) <= limit else (tokens[:limit], "length")


class StandIn:
    """The chat endpoint over the engine."""

    def __init__(self, knobs: Knobs, served: str):
        self.knobs, self.served = knobs, served
        self.engine = Engine(knobs)
        self.metrics = Metrics(served)

    async def completions(self, request: web.Request) -> web.StreamResponse:
        arrived = time.monotonic()
        self.engine.arrive()
        body = await request.json()
        if body.get("model") != self.served:
            return web.json_response({"error": {"message": f"The model `{body.get('model')}` "
                                                "does not exist.", "code": 404}}, status=404)
        schema = request_schema(body)
        key = self.engine.request.grammar_key(schema) if schema is not None else ""
        made = tokens_for(body, schema, key, self.knobs.invalid_title)
        if isinstance(made, str):
            return web.json_response({"error": {"message": made, "code": 400}}, status=400)
        tokens, finish = made
        if schema is not None:
            await self.engine.compile(key)
        scheduled = time.monotonic()
        await asyncio.sleep(self.knobs.first_token_s)
        resp = await open_stream(request)
        seq = Sequence(tokens, guided=schema is not None)
        self.engine.admit(seq)
        try:
            await self.stream(resp, seq, finish, arrived, scheduled)
        finally:
            self.engine.drop(seq)  # a client gone mid-stream
        return resp

    async def stream(self, resp: web.StreamResponse, seq: Sequence, finish: str,
                     arrived: float, scheduled: float) -> None:
        await resp.write(role_chunk(self.served))
        held: list[bytes] = []
        for i in range(len(seq.tokens)):
            token = await seq.out.get()
            if i == 0:
                self.metrics.observe(arrived, scheduled, time.monotonic())
            last = i == len(seq.tokens) - 1
            held.append(chunk(token, finish if last else None, model=self.served))
            if len(held) >= self.knobs.hold_back or last:
                await resp.write(b"".join(held))
                held = []
        await resp.write(usage_tail(len(seq.tokens)))

    def app(self) -> web.Application:
        app = stream_app(self.completions, self.served)
        app.router.add_get("/metrics", self.metrics.handle)

        async def start_engine(app: web.Application) -> None:
            app["engine"] = asyncio.get_running_loop().create_task(self.engine.loop())

        app.on_startup.append(start_engine)
        return app


def parse_args(argv: list[str]) -> argparse.Namespace:
    """`serve MODEL` (the gate's launch) or `--model MODEL`; vLLM's other flags accepted."""
    ap = argparse.ArgumentParser(prog="vllm")
    ap.add_argument("command", choices=["serve"])
    ap.add_argument("model_tag", nargs="?")
    ap.add_argument("--model")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8000)
    ap.add_argument("--served-model-name", nargs="+")
    ap.add_argument("--structured-outputs-config", type=json.loads, default={})
    args, _ = ap.parse_known_args(argv)
    args.model = args.model_tag or args.model
    if not args.model:
        ap.error("serve needs a model")
    args.served = (args.served_model_name or [args.model])[0]
    return args


def load_model(model: str) -> None:
    """A model folder as vLLM would start to load it: its config, every weights header."""
    folder = Path(model)
    if not folder.is_dir():
        return  # a hub id: nothing to read
    json.loads((folder / "config.json").read_text())
    from safetensors import safe_open

    for weights in sorted(folder.glob("*.safetensors")):
        with safe_open(str(weights), framework="numpy") as fh:
            fh.keys()


def start_engine_core(pid: int, env: Mapping[str, str]) -> subprocess.Popen:
    """The titled child, and the lines vLLM's engine core logs about runner and threads."""
    core = subprocess.Popen([sys.executable, "-c", ENGINE_CORE, str(pid)])
    runner = env.get("VLLM_USE_V2_MODEL_RUNNER")
    if runner is None:  # the CPU build: V2 needs Triton
        log("APIServer", pid, "WARNING", "vllm.py:725",
            "Model Runner V2 requires Triton; using the V1 model runner instead.")
    elif bool(int(runner)):  # as vLLM reads it
        log("EngineCore_DP0", core.pid, "INFO", "gpu_worker.py:518", "Using V2 Model Runner")
    else:
        log("EngineCore_DP0", core.pid, "INFO", "gpu_model_runner.py:5039",
            "Starting to load model ...")
    omp = env.get("OMP_NUM_THREADS", "")
    if omp.isdigit():
        threads = min(int(omp), os.cpu_count() or 1)  # torch caps it at the host's cores
        log("EngineCore", core.pid, "WARNING", "torch_utils.py:283",
            f"OMP_NUM_THREADS={omp} is set; leaving Torch threads at {threads} for serving.")
    else:
        log("EngineCore", core.pid, "INFO", "torch_utils.py:295",
            f"Reducing Torch threads from {len(os.sched_getaffinity(0))} to 1 for serving.")
    return core


# Set in a build's environment: its server dies at start-up (tests of a build that does not
# serve, gate.flows.first_start and the first cause of an error).
DIE_AT_START = "FAKE_VLLM_DIE_AT_START"
# Set in a build's environment: the build refuses the plan at start-up with vLLM's own
# ValueError (gate.measure.server.refusal).
REFUSE = "FAKE_VLLM_REFUSE"
# Set in a server's environment: the guided outputs of one schema (by its title) are invalid.
INVALID_TITLE = "FAKE_VLLM_INVALID_TITLE"


@pydantic_dataclass
class VllmConfig:
    """The stand-in of vLLM's configuration (vllm/config/vllm.py: a pydantic dataclass whose
    checks, _validate_v2_model_runner among them, raise ValueError): a plan this build cannot
    serve ends the server with pydantic's ValidationError, uncaught, its `Value error, ...`
    line vLLM's reason, as `vllm serve` prints it."""

    refusal: str = ""

    def __post_init__(self) -> None:
        if self.refusal:
            raise ValueError(self.refusal)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if message := os.environ.get(DIE_AT_START):
        sys.stdout.write("INFO starting the API server\nTraceback (most recent call last):\n"
                         '  File "vllm/__init__.py", line 1, in <module>\n'
                         f"RuntimeError: {message}\n")
        sys.stdout.flush()
        return 1
    import vllm

    pid, knobs = os.getpid(), Knobs.from_env(os.environ)
    log("APIServer", pid, "INFO", "api_utils.py:327",
        f"vLLM server version {vllm.__version__}, serving model {args.model}")
    log("APIServer", pid, "INFO", "api_utils.py:286",
        f"non-default args: {{'model': {args.model!r}, 'port': {args.port}, "
        f"'structured_outputs_config': {args.structured_outputs_config}}} (stand-in: {knobs})")
    VllmConfig(refusal=os.environ.get(REFUSE, ""))
    load_model(args.model)
    core = start_engine_core(pid, os.environ)
    try:
        time.sleep(knobs.start_s)
        web.run_app(StandIn(knobs, args.served).app(), host=args.host, port=args.port,
                    print=None, access_log=None)
    finally:
        core.terminate()
    return 0
