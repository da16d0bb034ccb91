"""One benchmark, all engines, one run: our torch / TorchScript / ONNX Runtime backends and
CTranslate2 (from our exporter) on the same model and the same sentences (a script, not a test).

For every model size (the bundled model; a Transformer-base-sized one with random weights) and
engine, every beam x batch size decodes the first --sentences sentences of a Multi30k split, in
order, and reports sentences/s, target tokens/s (pieces, EOS not counted), p50/p95 latency of a
call at batch 1, the engine process's peak memory (RSS on CPU; on CUDA torch's peak allocation),
sacreBLEU (13a, cased, detokenised) of its output against the references, the share of top
outputs identical to our float32 torch output with the same beam and batch, and its throughput
ratio to CTranslate2 (int8 with intra_threads=1 on CPU, float16 on CUDA); also sentences per
second of the process's CPU time and that ratio, which on a machine shared with other work
compares one-thread engines far more steadily than wall time does. Each engine runs in a
child process of its own, so that memory is its own and thread settings do not leak; on the CPU
each keeps its freed heap (model/cpu_allocator.py), as the service's runtime does. Decoding
returns no attention (CTranslate2 neither), n_best 1, the service's other decoding defaults.

    python benchmarks/engines.py                                       # full CPU run, appends results/engines_cpu.md
    python benchmarks/engines.py --sentences 64 --batch-sizes 1,32 --beams 5 --sizes bundled --engines torch,torch-int8,ct2-int8
    python benchmarks/engines.py --engines torch,torch@2,ct2,ct2@2 --sizes bundled  # thread settings
    python benchmarks/engines.py --device cuda                         # float16 engines, results/engines_cuda.md

Engines (CPU): torch (eager float32), torch-kernels (float32 through the C decoding kernels,
model/decoding/kernel_backend.py: the service's PHRASAL_CPU_QUANTIZATION=none), torch-int8
(model/quantization.py, eager), torch-int8-kernels (int8 through the kernels: what the service runs
by default on the CPU where the model verified int8), torch-int8-layers (eager int8 with the output projection left
float32: what quantising it buys), torch-static (static-state decoding, eager steps), torchscript,
onnx, onnx-int8 (ONNX Runtime quantisation, export/onnx_quantize.py), ct2, ct2-int8. On CUDA:
torch, torch-fp16, torch-graphs and torch-fp16-graphs (static-state decoding with CUDA graphs: what
the service runs on CUDA), torchscript-fp16, onnx-fp16, ct2-fp16, ct2-int8-fp16. Only when named:
torch-static-compiled and torch-fp16-graphs-compiled, static decoding with its step through
torch.compile (model/decoding/compiled_step.py: fused kernels in each graph). CTranslate2 gets
one `translate_batch` per batch (export/ct2_runner.py). Exports are made by our exporter without
its verification (the agreement column is this benchmark's check) into --work-dir.
"""
from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import re
import resource
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run as a script: the repository's packages first
    sys.path.insert(0, str(REPO))

from benchmarks.host import cpu_name  # noqa: E402


@dataclass(frozen=True)
class Engine:
    name: str
    backend: str  # torch | torchscript | onnx | ct2
    precision: str  # float32 | float16 | int8 (ct2: its quantization name)
    threads: int | None = None  # None: --threads
    # torch only: "kernels" decodes through the C kernels (model/decoding/kernel_backend.py), "static"
    # on preallocated state with its steps replayed as CUDA graphs on CUDA, eager steps on the CPU
    # (model/decoding/static_decoding.py, cuda_graph_step.py): what the service runs on CUDA;
    # "static-compiled" the same with the step through torch.compile (model/decoding/compiled_step.py).
    decoder: str = "eager"
    # Run when --engines names none; the compiled ones only when named (compiling takes a minute or more).
    by_default: bool = True


CPU_ENGINES = (
    Engine("torch", "torch", "float32"),
    Engine("torch-kernels", "torch", "float32", decoder="kernels"),
    Engine("torch-int8", "torch", "int8"),
    Engine("torch-int8-kernels", "torch", "int8", decoder="kernels"),
    Engine("torch-int8-layers", "torch", "int8-layers"),  # the output projection left float32
    Engine("torch-static", "torch", "float32", decoder="static"),
    Engine("torch-static-compiled", "torch", "float32", decoder="static-compiled", by_default=False),
    Engine("torchscript", "torchscript", "float32"),
    Engine("onnx", "onnx", "float32"),
    Engine("onnx-int8", "onnx", "int8"),
    Engine("ct2", "ct2", "float32"),
    Engine("ct2-int8", "ct2", "int8", threads=1),
)
CUDA_ENGINES = (
    Engine("torch", "torch", "float32"),
    Engine("torch-fp16", "torch", "float16"),
    Engine("torch-graphs", "torch", "float32", decoder="static"),
    Engine("torch-fp16-graphs", "torch", "float16", decoder="static"),
    Engine("torch-fp16-graphs-compiled", "torch", "float16", decoder="static-compiled", by_default=False),
    Engine("torchscript-fp16", "torchscript", "float16"),
    Engine("onnx-fp16", "onnx", "float16"),
    Engine("ct2-fp16", "ct2", "float16"),
    Engine("ct2-int8-fp16", "ct2", "int8_float16"),
)
REFERENCE_OUTPUT = "torch"  # agreement is measured against this engine's output
SPEED_REFERENCE = {"cpu": "ct2-int8", "cuda": "ct2-fp16"}
# Transformer-base (Vaswani et al.): 6+6 layers, d 512, FFN 2048, 8 heads; random weights.
BASE = dict(d_model=512, n_heads=8, d_ff=2048, encoder_layers=6, decoder_layers=6, dropout=0.1)
# Random-weight models besides the bundled one (--sizes), as changes to its config. With random
# weights a search runs to its length limit, so "random" (the bundled architecture) and
# "queryk-random" (QueryK heterogeneous 1-2-3 at every site, the study's recipe) do the same
# number of steps: their times compare the attention kinds (issue 30: QueryK <= 1.5x vanilla).
QUERYK = {"kind": "queryk", "options": {"structure": "heterogeneous", "ngrams": [1, 2, 3]}}
RANDOM_SIZES = {
    "base": BASE,
    "random": {},
    "queryk-random": {site: QUERYK for site in ("encoder_self_attention", "decoder_self_attention", "cross_attention")},
}


def engines_for(device: str) -> tuple[Engine, ...]:
    return CUDA_ENGINES if device == "cuda" else CPU_ENGINES


# ---------------------------------------------------------------- the parent: models, exports, table


def random_model_dir(like: Path, size: str, out: Path, seed: int = 0) -> Path:
    """A model with random weights, `like`'s config changed by RANDOM_SIZES[size], its tokenizer and pair."""
    import torch

    from model.model_dir import TOKENIZER_FILE, load_model_dir, save_model_dir
    from model.config import ModelConfig
    from model.transformer import Transformer

    if (out / "manifest.json").is_file():
        return out
    loaded = load_model_dir(like)
    values = {**json.loads(loaded.config.to_json()), **RANDOM_SIZES[size]}
    torch.manual_seed(seed)
    model = Transformer(ModelConfig.from_dict(values)).eval()
    return save_model_dir(out, model, like / TOKENIZER_FILE, source_lang=loaded.source_lang, target_lang=loaded.target_lang)


def export_for(engine: Engine, model_dir: Path, out: Path, device: str) -> Path | None:
    """The export `engine` runs (None for eager torch), made once per work directory."""
    if engine.backend == "torch":
        return None
    if (out / "manifest.json").is_file():
        return out
    from export.pipeline import ExportRequest, run_export

    options: dict[str, Any] = {"quantization": engine.precision} if engine.backend == "ct2" else {"dtype": engine.precision}
    if engine.backend == "torchscript":
        options["device"] = device
    run_export(ExportRequest(target=engine.backend, model_dir=model_dir, out_dir=out, verify=False, force=True, **options),
               log=lambda _: None)
    return out


def run_worker(job: dict[str, Any]) -> dict[str, Any]:
    """One engine's runs in a child process; its JSON answer."""
    with tempfile.TemporaryDirectory() as tmp:
        spec, answer = Path(tmp) / "job.json", Path(tmp) / "answer.json"
        spec.write_text(json.dumps(job))
        threads = str(job["threads"])
        env = {**os.environ, "OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads}
        done = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--worker", str(spec), str(answer)],
                              env=env, cwd=REPO, capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"engine {job['engine']['name']} failed:\n{done.stderr[-3000:]}")
        return json.loads(answer.read_text())


def corpus_bleu(hypotheses: list[str], references: list[str]) -> float:
    import sacrebleu

    return round(float(sacrebleu.corpus_bleu(hypotheses, [references]).score), 2)


def table_rows(runs: list[dict[str, Any]], references: list[str] | None, device: str) -> list[dict[str, Any]]:
    """One row per (size, engine, beam, batch) with BLEU, agreement and the speed ratio."""
    outputs = {(r["size"], r["engine"], r["beam"], r["batch"]): r["outputs"] for r in runs}
    speeds = {(r["size"], r["engine"], r["beam"], r["batch"]): r["sentences_per_s"] for r in runs}
    cpu_speeds = {(r["size"], r["engine"], r["beam"], r["batch"]): r["sentences_per_cpu_s"] for r in runs}
    rows = []
    for r in runs:
        key = (r["size"], r["beam"], r["batch"])
        own = r["outputs"]
        reference_output = outputs.get((r["size"], REFERENCE_OUTPUT, r["beam"], r["batch"]))
        agreement = None if reference_output is None else sum(a == b for a, b in zip(own, reference_output)) / len(own)
        fastest = speeds.get((key[0], SPEED_REFERENCE[device], key[1], key[2]))
        fastest_cpu = cpu_speeds.get((key[0], SPEED_REFERENCE[device], key[1], key[2]))
        row = {k: v for k, v in r.items() if k != "outputs"}
        row["bleu"] = corpus_bleu(own, references) if references is not None else None
        row["agreement"] = None if agreement is None else round(agreement, 4)
        row["ratio_to_ct2"] = None if not fastest else round(r["sentences_per_s"] / fastest, 3)
        row["cpu_ratio_to_ct2"] = None if not fastest_cpu else round(r["sentences_per_cpu_s"] / fastest_cpu, 3)
        rows.append(row)
    return rows


def _fmt(value: Any, spec: str) -> str:
    return "–" if value is None else format(value, spec)


def markdown(rows: list[dict[str, Any]], device: str) -> list[str]:
    reference = SPEED_REFERENCE[device]
    lines = [f"| model | engine | threads | beam | batch | sent/s | tok/s | p50 ms (b1) | p95 ms (b1) | peak MiB | BLEU | agree w/ torch fp32 | × {reference} | sent/CPU-s | × {reference} by CPU time |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(
            f"| {r['size']} | {r['engine']} | {r['threads']} | {r['beam']} | {r['batch']} | {r['sentences_per_s']:.1f} | "
            f"{r['tokens_per_s']:.0f} | {_fmt(r['p50_ms'], '.1f')} | {_fmt(r['p95_ms'], '.1f')} | {r['peak_mib']:.0f} | "
            f"{_fmt(r['bleu'], '.2f')} | {_fmt(r['agreement'], '.3f')} | {_fmt(r['ratio_to_ct2'], '.2f')} | "
            f"{r['sentences_per_cpu_s']:.1f} | {_fmt(r['cpu_ratio_to_ct2'], '.2f')} |")
    return lines


def versions() -> str:
    import importlib.metadata as md

    names = ("torch", "onnxruntime", "ctranslate2", "sacrebleu")
    found = []
    for name in names:
        try:
            found.append(f"{name} {md.version(name)}")
        except md.PackageNotFoundError:
            pass
    return ", ".join(found)


def machine(device: str) -> str:
    if device == "cuda":
        import torch

        return f"{torch.cuda.get_device_name(0)} (host CPU: {cpu_name()}, {os.cpu_count()} cores)"
    return f"{cpu_name()}, {os.cpu_count()} cores"


def main(argv: Sequence[str] | None = None) -> list[dict[str, Any]]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model-dir", type=Path, default=Path("models/en-de"))
    parser.add_argument("--sizes", default="bundled,base",
                        help="bundled (--model-dir), base (random Transformer-base), random (random weights, the bundled "
                             "architecture), queryk-random (the same with QueryK heterogeneous 1-2-3 attention)")
    parser.add_argument("--engines", default="", help="comma-separated engine names, NAME@N for N threads (default: all for the device)")
    parser.add_argument("--data", type=Path, default=Path("data/multi30k"))
    parser.add_argument("--split", default="test_2016_flickr")
    parser.add_argument("--sentences", type=int, default=1000)
    parser.add_argument("--beams", default="1,5")
    parser.add_argument("--batch-sizes", default="1,32,128")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--threads", type=int, default=1, help="intra-op threads of every engine but ct2-int8 (always 1)")
    parser.add_argument("--work-dir", type=Path, default=None, help="where the base model and the exports go (reused; default a temporary one)")
    parser.add_argument("--results", type=Path, default=None, help="markdown file appended to (default results/engines_<device>.md; '-' for none)")
    parser.add_argument("--json", type=Path, default=None, help="also write the rows as JSON")
    parser.add_argument("--note", default="", help="a line written under the table (e.g. the machine's load)")
    args = parser.parse_args(argv)

    from export.verify import read_verify_set
    from model.model_dir import load_model_dir

    known = {e.name: e for e in engines_for(args.device)}
    names = [n for n in args.engines.split(",") if n] or [name for name, e in known.items() if e.by_default]
    unknown = [n for n in names if n.split("@")[0] not in known or not re.fullmatch(r"[^@]+(@[1-9][0-9]*)?", n)]
    if unknown:
        parser.error(f"unknown engine(s) {', '.join(unknown)} for {args.device}; known: {', '.join(known)} "
                     "(NAME@N: with N threads)")
    for name in names:  # NAME@N: the engine with N intra-op threads
        if "@" in name:
            base, threads = name.split("@")
            known[name] = dataclasses.replace(known[base], name=name, threads=int(threads))
    sizes = [s for s in args.sizes.split(",") if s]
    if any(s != "bundled" and s not in RANDOM_SIZES for s in sizes):
        parser.error(f"--sizes takes bundled, {', '.join(RANDOM_SIZES)}; got {args.sizes!r}")
    beams = [int(b) for b in args.beams.split(",") if b]
    batches = [int(b) for b in args.batch_sizes.split(",") if b]
    loaded = load_model_dir(args.model_dir)
    data = read_verify_set(args.data, args.split, loaded.source_lang, loaded.target_lang, args.sentences)
    scratch = None if args.work_dir else tempfile.TemporaryDirectory(prefix="engines-")
    work = args.work_dir or Path(scratch.name)
    try:
        runs = []
        for size in sizes:
            model_dir = args.model_dir if size == "bundled" else random_model_dir(args.model_dir, size, work / f"{size}-model")
            for name in names:
                engine = known[name]
                if size == "queryk-random" and (engine.backend == "ct2" or engine.decoder == "kernels"):
                    lacks = "CTranslate2 has" if engine.backend == "ct2" else "the C decoding kernels have"
                    print(f"{size} {engine.name}: skipped ({lacks} no phrasal attention)", file=sys.stderr)
                    continue
                threads = engine.threads or args.threads
                export = export_for(engine, model_dir, work / f"{size}-{args.device}-{engine.name.split('@')[0]}", args.device)
                print(f"{size} {engine.name} ({threads} thread{'s' * (threads > 1)}) ...", file=sys.stderr, flush=True)
                answer = run_worker({"engine": dataclasses.asdict(engine), "model_dir": str(model_dir),
                                     "export_dir": str(export) if export else None, "device": args.device,
                                     "threads": threads, "sources": data.sources, "beams": beams, "batches": batches})
                mine = [{"size": size, "engine": engine.name, "threads": threads, **r, "peak_mib": answer["peak_mib"]}
                        for r in answer["runs"]]
                # Each engine's raw runs as they come: a run cut short (a GPU slot's limit) keeps those done.
                for run in mine:
                    print("run " + json.dumps({k: v for k, v in run.items() if k != "outputs"}), file=sys.stderr,
                          flush=True)
                runs += mine
    finally:
        if scratch is not None:
            scratch.cleanup()
    rows = table_rows(runs, data.references, args.device)
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    command = "python benchmarks/engines.py " + shlex.join(argv if argv is not None else sys.argv[1:])
    report = [f"## {stamp}: {machine(args.device)}", "", f"    {command}", "",
              f"{len(data.sources)} sentences of {args.split}, {versions()}; BLEU: sacreBLEU 13a, cased, detokenised "
              f"against the references; peak MiB: the engine process's {'peak RSS' if args.device == 'cpu' else 'peak RSS (torch: + CUDA peak allocation)'}.",
              "", *markdown(rows, args.device), ""]
    if args.note:
        report += [args.note, ""]
    print("\n".join(report))
    results = args.results or Path(f"results/engines_{args.device}.md")
    if str(results) != "-":
        results.parent.mkdir(parents=True, exist_ok=True)
        fresh = not results.exists()
        with results.open("a", encoding="utf-8") as handle:
            if fresh:
                handle.write("# All engines, one run (benchmarks/engines.py)\n\n")
            handle.write("\n".join(report) + "\n")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n")
    return rows


# ---------------------------------------------------------------- the child: one engine, timed


def load_translate(job: dict[str, Any]):
    """`translate(list of piece-id lists, beam) -> list of top token-id lists` for the job's engine."""
    import torch

    from model.decoding.generate import generate, pad_sources
    from model.decoding.options import DecodingOptions

    engine = Engine(**job["engine"])
    device = job["device"]
    if engine.backend == "torch":
        from model.model_dir import load_model_dir
        from model.attention.kernels import avoid_per_shape_attention_plans
        from model.quantization import quantize_int8

        loaded = load_model_dir(job["model_dir"])
        torch_device = torch.device(device)
        avoid_per_shape_attention_plans(torch_device)
        if engine.precision.startswith("int8"):
            model = quantize_int8(loaded.model, output_projection=engine.precision == "int8")
        else:
            model = loaded.model.to(device=torch_device, dtype=getattr(torch, engine.precision))
        if engine.decoder == "kernels":
            from model.decoding.kernel_backend import KernelBackend

            model = KernelBackend(model)
        elif engine.decoder in ("static", "static-compiled"):
            from model.decoding.compiled_step import CompiledStepBackend
            from model.decoding.cuda_graph_step import static_step_runner
            from model.decoding.static_decoding import StaticGenerator

            step = CompiledStepBackend(model) if engine.decoder == "static-compiled" else model
            model = StaticGenerator(step, static_step_runner(torch_device))
        config = loaded.config

        def translate(sources: list[list[int]], beam: int) -> list[list[int]]:
            src = pad_sources([ids + [config.eos_id] for ids in sources], config.pad_id, torch_device)
            return [h[0].tokens for h in generate(model, src, DecodingOptions(beam_size=beam, n_best=1))]

        return translate
    from export.runners import open_runner

    runner = open_runner(job["export_dir"], device=device, threads=job["threads"])

    def translate(sources: list[list[int]], beam: int) -> list[list[int]]:
        return [h[0].tokens for h in runner.generate(sources, DecodingOptions(beam_size=beam, n_best=1))]

    return translate


def peak_rss_mib() -> float:
    """This process's peak resident memory. VmHWM belongs to the program since its exec; ru_maxrss
    would also count the parent's resident pages at fork (Linux keeps that maximum across exec)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024  # kB
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux; bytes on macOS


def worker(job: dict[str, Any]) -> dict[str, Any]:
    import torch

    from model.text.tokenizer import Tokenizer
    from model.model_dir import TOKENIZER_FILE

    torch.set_num_threads(job["threads"])
    cuda = job["device"] == "cuda"
    if not cuda:
        # Every engine's process keeps its freed heap, as the CPU torch runtime does
        # (model/cpu_allocator.py); ONNX Runtime and CTranslate2 pool their own buffers.
        from model.cpu_allocator import retain_freed_memory

        retain_freed_memory()
    tokenizer = Tokenizer(Path(job["model_dir"]) / TOKENIZER_FILE)
    ids = tokenizer.encode_batch(job["sources"])
    translate = load_translate(job)
    engine = Engine(**job["engine"])

    def sync() -> None:
        if cuda:
            torch.cuda.synchronize()

    runs = []
    for beam in job["beams"]:
        for batch in job["batches"]:
            chunks = [ids[i : i + batch] for i in range(0, len(ids), batch)]
            # Warm-up: kernels, allocator, ORT's first run. Static decoding captures one CUDA graph per
            # (bucket, step) once in a process's life, so it sees every chunk first, as a server
            # that has run a while has.
            for chunk in chunks if engine.decoder.startswith("static") else chunks[:1]:
                translate(chunk, beam)
            outputs, calls = [], []
            sync()
            began, cpu_began = time.perf_counter(), time.process_time()
            for chunk in chunks:
                start = time.perf_counter()
                outputs += translate(chunk, beam)
                sync()
                calls.append(1000 * (time.perf_counter() - start))
            seconds, cpu_seconds = time.perf_counter() - began, time.process_time() - cpu_began
            tokens = sum(len(t) for t in outputs)
            single = batch == 1
            runs.append({
                "beam": beam, "batch": batch, "sentences": len(ids), "seconds": round(seconds, 6),
                "sentences_per_s": round(len(ids) / seconds, 2), "cpu_seconds": round(cpu_seconds, 6),
                "sentences_per_cpu_s": round(len(ids) / cpu_seconds, 2), "tokens": tokens, "tokens_per_s": round(tokens / seconds, 1),
                "p50_ms": round(statistics.median(calls), 2) if single else None,
                "p95_ms": round(statistics.quantiles(calls, n=20, method="inclusive")[18], 2) if single and len(calls) > 1 else (round(calls[0], 2) if single else None),
                "outputs": [tokenizer.decode(t) for t in outputs],
            })
    peak = peak_rss_mib()
    if cuda:
        peak += torch.cuda.max_memory_allocated() / 2**20
    return {"runs": runs, "peak_mib": round(peak, 1)}


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--worker":
        answer = worker(json.loads(Path(sys.argv[2]).read_text()))
        Path(sys.argv[3]).write_text(json.dumps(answer))
    else:
        main()
