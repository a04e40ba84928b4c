"""Greedy vs beam search of one checkpoint: BLEU, chrF and decoding speed (the paper: greedy search
of a tempered model matches beam search of an untempered one, 1.5-3.5x faster).

    ctemp-greedy-vs-beam DATA_BIN --checkpoint ckpt/checkpoint_best.pt [--beam 5 --subset test] \\
        [--ref raw/test.tgt] [--save-dir out --json out/result.json] \\
        -- --cpu --batch-size 64 --remove-bpe sentencepiece --max-len-a 1.2 --max-len-b 10
    ctemp-greedy-vs-beam DATA_BIN --checkpoint CKPT --grid-beams 2,4,6,8,10,12 \\
        --grid-lenpens 0.6,0.8,1.0,1.2,1.4 --dev-subset valid [--dev-ref raw/valid.tgt] -- --cpu
    ctemp-greedy-vs-beam compare --ref out/ref --baseline out/beam.hyp --system out/greedy.hyp \\
        [--test bs|ar] [--n-samples 1000] [--sacrebleu-tokenize none]

Each system is one run of the real fairseq-generate with --user-dir fairseq_ctemp, so a checkpoint
trained with tempered_ce decodes at its training T (--temperature replaces it); options after --
go to fairseq-generate, after --required-batch-size-multiple 1 (with fairseq's default 8, a last
batch of another size is silently not translated). Decode time is fairseq's own "Translated ..." timing (start-up excluded).
Hypotheses are the D- lines (after --remove-bpe/--bpe/--tokenizer), sorted by id. References are
the T- lines (post-processed like the hypotheses, OOVs as <<unk>>) scored as they are, sacrebleu
tokenize=none ("tokenised" BLEU), or with --ref a raw reference file scored detokenised with
sacrebleu's 13a (comparable with published numbers). The grid decodes --dev-subset for every
(beam, lenpen); the best dev BLEU is the beam system on --subset. Outputs are never overwritten.
"""

import argparse
import contextlib
import glob
import io
import json
import logging
import math
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
import traceback

from sacrebleu.metrics import BLEU, CHRF
from sacrebleu.significance import PairedTest

from . import inputs

PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the --user-dir
# Set here for every run; passing them after -- would make the two systems differ silently.
OWN_OPTIONS = (
    "--path",
    "--beam",
    "--lenpen",
    "--gen-subset",
    "--temperature",
    "--user-dir",
    "--results-path",
    "--quiet",
)
TRANSLATED = re.compile(
    r"Translated ([\d,]+) sentences \(([\d,]+) tokens\) in ([\d.]+)s "
    r"\(([\d.]+) sentences/s, ([\d.]+) tokens/s\)"
)
# the model's own temperature, as fairseq_ctemp.decoding logs it: a training T or a calibrated t*
OWN_T = re.compile(r"decoding at (?:training temperature T|calibrated temperature t\*)=([\d.eE+-]+)")
SYSTEM_KEYS = (
    "beam",
    "lenpen",
    "bleu",
    "chrf",
    "n_sentences",
    "n_tokens",
    "decode_seconds",
    "sentences_per_second",
    "tokens_per_second",
    "wall_seconds",
    "decoding_temperature",
)


class UsageError(Exception):
    """Bad input, existing output or a failed fairseq-generate: main() prints it as one error."""


def check(option, values, ok, allowed):
    for value in values:
        if not ok(value):
            raise UsageError(f"{option} must be {allowed}, got {value}")


def positive(x):
    return isinstance(x, (int, float)) and math.isfinite(x) and x > 0


def fairseq_generate():
    local = os.path.join(os.path.dirname(sys.executable), "fairseq-generate")
    found = local if os.access(local, os.X_OK) else shutil.which("fairseq-generate")
    if not found:
        raise UsageError(f"fairseq-generate is neither next to {sys.executable} nor on PATH")
    return found


def subset_size(data, subset):
    """Sentences in a binarized subset, so that a --ref with the wrong number of lines fails before
    any decoding; None if unknown (no index, or language pairs of different sizes)."""
    from fairseq.data import data_utils  # already imported with the plugin

    sizes = set()
    for index in glob.glob(os.path.join(data.split(":")[0], glob.escape(subset) + ".*-*.*.idx")):
        dataset = data_utils.load_indexed_dataset(index[: -len(".idx")], None)
        sizes.add(len(dataset) if dataset is not None else None)
    return sizes.pop() if len(sizes) == 1 else None


def read_lines(path, option, expected=None):
    if not os.path.isfile(path):
        raise UsageError(f"{option} {path}: no such file")
    try:
        lines = inputs.read_utf8_lines(path)
    except inputs.InputError as e:
        raise UsageError(f"{option} {path}: {e}") from None
    if not lines:
        raise UsageError(f"{option} {path} is empty")
    if expected is not None and len(lines) != expected:
        raise UsageError(f"{option} {path} has {len(lines)} lines but there are {expected} sentences")
    return lines


def generate_in_process(command):
    """fairseq-generate `command` (its argv, program first) run in this process, with the same stdout
    and log text as the console script; saves importing torch and fairseq for every decoding of a
    grid. Returns a subprocess.CompletedProcess (bytes), a failure as a non-zero returncode."""
    from fairseq import options
    from fairseq_cli import generate

    out, err = io.StringIO(), io.StringIO()
    handler = logging.StreamHandler(err)
    handler.setFormatter(logging.Formatter("%(asctime)s | %(levelname)s | %(name)s | %(message)s"))
    root = logging.getLogger()
    level, argv, code = root.level, sys.argv, 0
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    sys.argv = ["fairseq-generate"] + list(command[1:])  # fairseq's get_parser reads --user-dir there
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            parser = options.get_generation_parser()
            parser.add_argument("--arch", "-a", default="wav2vec2")  # as fairseq-generate's cli_main
            generate.main(options.parse_args_and_arch(parser, input_args=list(command[1:])))
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 1
    except Exception:  # reported like a failed fairseq-generate
        err.write(traceback.format_exc())
        code = 1
    finally:
        root.removeHandler(handler)
        root.setLevel(level)
        sys.argv = argv
    return subprocess.CompletedProcess(command, code, out.getvalue().encode(), err.getvalue().encode())


def decode(
    data, checkpoint, subset, beam, lenpen, extra_args=(), temperature=None, expected=None, in_process=False
):
    """One fairseq-generate run (a subprocess, or generate_in_process): hypotheses and T- references
    sorted by id, timing and the log."""
    command = [
        fairseq_generate(),
        data,
        "--path",
        checkpoint,
        "--user-dir",
        PACKAGE_DIR,
        "--gen-subset",
        subset,
        "--beam",
        str(beam),
        "--lenpen",
        str(lenpen),
        # fairseq 0.12 drops a last batch whose size is not a multiple of this (default 8)
        "--required-batch-size-multiple",
        "1",
    ]
    command += (["--temperature", str(temperature)] if temperature is not None else []) + list(extra_args)
    start = time.perf_counter()
    proc = (
        generate_in_process(command)
        if in_process
        else subprocess.run(command, capture_output=True, env={**os.environ, "PYTHONIOENCODING": "utf-8"})
    )
    wall = time.perf_counter() - start
    # Decoded here and split on "\n" only: a hypothesis may contain "\r" or U+2028.
    stdout, stderr = (out.decode("utf-8", errors="replace") for out in (proc.stdout, proc.stderr))
    shown = f"$ {shlex.join(command)}"
    if proc.returncode != 0:
        tail = "\n".join(stderr.strip().split("\n")[-12:])
        raise UsageError(
            f"fairseq-generate failed (exit {proc.returncode}):\n{shown}\n{tail}\n"
            f"(fairseq-generate failed to decode {subset} of {data} with --checkpoint "
            f"{checkpoint}: its error is above)"
        )
    hyps, refs = {}, {}
    for line in stdout.split("\n"):
        tag, _, rest = line.partition("\t")
        if tag[:2] in ("D-", "T-") and tag[2:].isdigit():
            if tag[0] == "D":
                hyps.setdefault(int(tag[2:]), rest.partition("\t")[2])  # the first is the best (--nbest)
            else:
                refs[int(tag[2:])] = rest
    timing = TRANSLATED.search(stderr) or TRANSLATED.search(stdout)
    if timing is None:
        raise UsageError(f"no 'Translated N sentences' line in the log of {shown}")
    ids = sorted(hyps)
    expected = expected if expected is not None else (ids[-1] + 1 if ids else 0)
    if ids != list(range(expected)):
        raise UsageError(
            f"fairseq-generate translated {len(ids)} of the {expected} sentences of {subset} "
            "(--skip-invalid-size-inputs-valid-test or --required-batch-size-multiple > 1 "
            "drop sentences); the scores would not be comparable"
        )
    sentences, tokens = (int(timing.group(i).replace(",", "")) for i in (1, 2))
    per_second = float(timing.group(4))  # printed with 2 decimals, the seconds with only 1
    own_t = OWN_T.search(stderr + stdout)
    return {
        "hyps": [hyps[i] for i in ids],
        "refs": [refs.get(i) for i in ids],
        "log": f"{shown}\n{stdout}{stderr}",
        "beam": beam,
        "lenpen": lenpen,
        "n_sentences": sentences,
        "n_tokens": tokens,
        "decode_seconds": sentences / per_second if per_second else float(timing.group(3)),
        "sentences_per_second": per_second,
        "tokens_per_second": float(timing.group(5)),
        "wall_seconds": wall,
        "decoding_temperature": temperature
        if temperature is not None
        else float(own_t.group(1))
        if own_t
        else 1.0,
    }


def score(hyps, refs, tokenize):
    """(BLEU, chrF) of hyps against one reference each, and the sacrebleu signatures."""
    if any(ref is None for ref in refs):
        raise UsageError("the subset has no target side (no T- lines): pass --ref / --dev-ref")
    bleu, chrf = BLEU(tokenize=tokenize), CHRF()
    scores = (bleu.corpus_score(hyps, [refs]).score, chrf.corpus_score(hyps, [refs]).score)
    return scores, {"bleu": str(bleu.get_signature()), "chrf": str(chrf.get_signature())}


def run_greedy_vs_beam(
    data,
    checkpoint,
    beam=5,
    subset="test",
    extra_args=(),
    lenpen=1.0,
    ref=None,
    temperature=None,
    tokenize=None,
    grid_beams=None,
    grid_lenpens=None,
    dev_subset="valid",
    dev_ref=None,
    save_dir=None,
    json_path=None,
    verbose=True,
    in_process=False,
):
    """Decode `subset` with beam 1 and with `beam` (or the dev grid's best), score, print, save.

    Returns {"data", "checkpoint", "subset", "n_sentences", "references" ("T- lines" or the ref
    path), "tokenize", "signatures": {"bleu", "chrf"}, "systems": {"greedy": S, "beam": S},
    "speedup" (greedy / beam sentences per second, fairseq's decode time), "speedup_wall" (beam /
    greedy subprocess wall time, start-up included), "grid" (list of S on dev_subset; [] without
    a grid), "grid_best" ({"beam", "lenpen"} or None), "dev_subset", "dev_tokenize", "extra_args",
    "files" (name -> path written)}, where S = {"beam", "lenpen", "bleu", "chrf", "n_sentences",
    "n_tokens", "decode_seconds", "sentences_per_second", "tokens_per_second", "wall_seconds",
    "decoding_temperature"}. in_process: run fairseq-generate in this process (no start-up per
    decoding; wall_seconds then excludes it). Raises UsageError (bad option, existing output, failed
    decoding)."""
    say = (lambda text: print(text, file=sys.stderr, flush=True)) if verbose else (lambda text: None)
    for option, paths in (("DATA", data), ("--checkpoint", checkpoint)):
        for path in paths.split(":"):
            if not (os.path.isdir(path) if option == "DATA" else os.path.exists(path)):
                raise UsageError(f"{option} {path}: no such {'directory' if option == 'DATA' else 'file'}")
    integer = lambda b: isinstance(b, int) and b >= 1  # noqa: E731
    check("--beam", [beam], integer, "an integer >= 1")
    check("--grid-beams", grid_beams or [], integer, "integers >= 1")
    check("--lenpen", [lenpen], positive, "a finite number > 0")
    check("--grid-lenpens", grid_lenpens or [], positive, "finite numbers > 0")
    check("--temperature", [temperature] if temperature is not None else [], positive, "finite and > 0")
    check(
        "--sacrebleu-tokenize",
        [tokenize] if tokenize else [],
        BLEU.TOKENIZERS.__contains__,
        f"one of {', '.join(BLEU.TOKENIZERS)}",
    )
    grid = bool(grid_beams or grid_lenpens)
    if dev_ref and not grid:
        raise UsageError("--dev-ref is only used with --grid-beams / --grid-lenpens")
    extra_args = list(extra_args)
    for option in (arg.split("=")[0] for arg in extra_args):
        if option in OWN_OPTIONS:
            raise UsageError(f"{option} cannot go to fairseq-generate after --: this command sets it")
    grid_beams, grid_lenpens = list(grid_beams or [beam]), list(grid_lenpens or [lenpen])
    names = ["greedy.hyp", "beam.hyp", "ref", "greedy.log", "beam.log"]
    names += [f"grid.beam{b}.lenpen{lp:g}.log" for b in grid_beams for lp in grid_lenpens] if grid else []
    files = {name: os.path.join(save_dir, name) for name in names} if save_dir else {}
    files.update({"json": json_path} if json_path else {})
    for path in files.values():
        if os.path.exists(path):
            raise UsageError(f"{path} already exists; refusing to overwrite it")
        parent = os.path.dirname(os.path.abspath(path))
        while not os.path.exists(parent):
            parent = os.path.dirname(parent)
        if not os.path.isdir(parent):  # found now, not after decoding
            raise UsageError(f"cannot write {path}: {parent} is a file, not a directory")
    # Keyed by role, not by subset name: --dev-subset may be the test subset itself.
    subsets, ref_options = {"test": subset, "dev": dev_subset}, {"test": "--ref", "dev": "--dev-ref"}
    sizes = {role: subset_size(data, subsets[role]) for role in (("test", "dev") if grid else ("test",))}
    raw = {
        role: read_lines(path, ref_options[role], sizes[role]) if path else None
        for role, path in (("test", ref), ("dev", dev_ref))
    }
    tokenize_for = {role: tokenize or ("13a" if raw[role] else "none") for role in raw}
    for path in checkpoint.split(":"):
        try:
            inputs.check_checkpoint(path)
        except inputs.InputError as e:
            raise UsageError(f"--checkpoint {path} {e}") from None
    logs = {}

    def run(log_name, role, beam_, lenpen_):
        say(f"decoding {subsets[role]} with beam {beam_}, lenpen {lenpen_:g} ...")
        out = decode(
            data, checkpoint, subsets[role], beam_, lenpen_, extra_args, temperature, sizes[role], in_process
        )
        if raw[role] is not None and len(raw[role]) != len(out["hyps"]):  # size was not known up front
            raise UsageError(
                f"{ref_options[role]} has {len(raw[role])} lines but {subsets[role]} has "
                f"{len(out['hyps'])} sentences"
            )
        out["refs"], logs[log_name] = raw[role] or out["refs"], out["log"]
        (out["bleu"], out["chrf"]), out["signatures"] = score(out["hyps"], out["refs"], tokenize_for[role])
        say(
            f"  BLEU {out['bleu']:.2f}, {out['sentences_per_second']:.1f} sentences/s, "
            f"T={out['decoding_temperature']:g}"
        )
        return out

    rows = (
        [run(f"grid.beam{b}.lenpen{lp:g}.log", "dev", b, lp) for b in grid_beams for lp in grid_lenpens]
        if grid
        else []
    )
    if rows:
        best = max(rows, key=lambda row: row["bleu"])  # ties: the first one, i.e. the smaller beam
        beam, lenpen = best["beam"], best["lenpen"]
    greedy, beamed = run("greedy.log", "test", 1, 1.0), run("beam.log", "test", beam, lenpen)
    result = {
        "data": data,
        "checkpoint": checkpoint,
        "subset": subset,
        "n_sentences": len(greedy["hyps"]),
        "references": ref or "T- lines",
        "tokenize": tokenize_for["test"],
        "signatures": greedy["signatures"],
        "systems": {
            name: {k: out[k] for k in SYSTEM_KEYS} for name, out in (("greedy", greedy), ("beam", beamed))
        },
        "speedup": greedy["sentences_per_second"] / beamed["sentences_per_second"],
        "speedup_wall": beamed["wall_seconds"] / greedy["wall_seconds"],
        "grid": [{k: row[k] for k in SYSTEM_KEYS} for row in rows],
        "grid_best": {"beam": beam, "lenpen": lenpen} if grid else None,
        "dev_subset": dev_subset if grid else None,
        "dev_tokenize": tokenize_for["dev"] if grid else None,
        "extra_args": extra_args,
        "files": files,
    }
    lines = {"greedy.hyp": greedy["hyps"], "beam.hyp": beamed["hyps"], "ref": greedy["refs"]}
    for name, path in files.items():
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        text = (
            json.dumps(result, indent=2) + "\n"
            if name == "json"
            else logs.get(name) or "".join(line + "\n" for line in lines[name])
        )
        with open(path, "x", encoding="utf-8") as f:  # "x": not even a file created meanwhile
            f.write(text)
    if verbose:
        print_report(result)
    return result


def print_report(result):
    row = (
        "{:<7} {beam:>4} {lenpen:>6.2f} {bleu:>6.2f} {chrf:>6.2f} {decode_seconds:>9.2f} "
        "{sentences_per_second:>8.1f}"
    )
    header = f"{'system':<7} {'beam':>4} {'lenpen':>6} {'BLEU':>6} {'chrF':>6} {'decode s':>9} {'sent/s':>8}"
    if result["grid"]:
        print(
            f"grid on {result['dev_subset']}, sacrebleu tokenize={result['dev_tokenize']} "
            f"(* = best BLEU, the beam system below):\n{header}"
        )
        for system in result["grid"]:
            best = {k: system[k] for k in ("beam", "lenpen")} == result["grid_best"]
            print(row.format("dev", **system) + (" *" if best else ""))
        print()
    systems = result["systems"]
    print(
        f"{result['subset']}: {result['n_sentences']} sentences, references: {result['references']}, "
        f"sacrebleu tokenize={result['tokenize']}, T={systems['greedy']['decoding_temperature']:g}"
    )
    print(header)
    for name, system in systems.items():
        print(row.format(name, **system))
    print(
        f"speed: greedy decodes {result['speedup']:.2f}x as fast as beam {systems['beam']['beam']} "
        f"({result['speedup_wall']:.2f}x in wall time, fairseq start-up included)"
    )
    print(f"BLEU signature: {result['signatures']['bleu']}\nchrF signature: {result['signatures']['chrf']}")
    if "ref" in result["files"]:
        files = result["files"]
        print(
            f"significance: ctemp-greedy-vs-beam compare --ref {files['ref']} --baseline "
            f"{files['beam.hyp']} --system {files['greedy.hyp']} --sacrebleu-tokenize {result['tokenize']}"
        )


def compare_systems(ref, baseline, system, test="bs", n_samples=None, tokenize="13a"):
    """Paired test of `system` against `baseline` (hypothesis files) by sacrebleu's PairedTest.
    Returns {"test", "n_samples", "identical", "signatures": {"bleu", "chrf"},
    "bleu": {"baseline", "system", "p_value"}, "chrf": {"baseline", "system", "p_value"}}."""
    check("--test", [test], ("bs", "ar").__contains__, "bs or ar")
    check("--n-samples", [n_samples] if n_samples is not None else [], lambda n: n >= 1, "an integer >= 1")
    check(
        "--sacrebleu-tokenize",
        [tokenize],
        BLEU.TOKENIZERS.__contains__,
        f"one of {', '.join(BLEU.TOKENIZERS)}",
    )
    refs = read_lines(ref, "--ref")
    systems = [
        (name, read_lines(path, f"--{name}", len(refs)))
        for name, path in (("baseline", baseline), ("system", system))
    ]
    paired = PairedTest(
        systems,
        {"bleu": BLEU(tokenize=tokenize), "chrf": CHRF()},
        [refs],
        test_type=test,
        n_samples=n_samples or 0,
    )
    signatures, scores = paired()
    result = {
        "test": test,
        "n_samples": paired.n_samples,
        "identical": systems[0][1] == systems[1][1],
        "signatures": {},
    }
    for key, name in zip(("bleu", "chrf"), [name for name in scores if name != "System"]):
        base, other = scores[name]
        # sacrebleu counts resampled differences strictly above the observed one, so with no
        # observed difference (e.g. identical files) it reports p = 1/(n+1). The p-value is 1.
        p_value = 1.0 if base.score == other.score else other.p_value
        result[key] = {"baseline": base.score, "system": other.score, "p_value": p_value}
        result["signatures"][key] = str(signatures[name])
    return result


def compare_main(argv):
    parser = argparse.ArgumentParser(
        prog="ctemp-greedy-vs-beam compare",
        description="Paired significance test (sacrebleu) of two systems.",
    )
    parser.add_argument("--ref", required=True, help="references, one a line (e.g. SAVE_DIR/ref)")
    parser.add_argument("--baseline", required=True, help="baseline hypotheses (e.g. SAVE_DIR/beam.hyp)")
    parser.add_argument("--system", required=True, help="system hypotheses (e.g. SAVE_DIR/greedy.hyp)")
    parser.add_argument(
        "--test",
        choices=("bs", "ar"),
        default="bs",
        help="bs: paired bootstrap resampling (default), ar: approximate randomisation",
    )
    parser.add_argument("--n-samples", type=int, help="resamples / trials (default: bs 1000, ar 10000)")
    parser.add_argument("--sacrebleu-tokenize", default="13a", help="BLEU tokenizer (13a; none for T- refs)")
    parser.add_argument("--json", help="also write the result here (must not exist)")
    args = parser.parse_args(argv)
    try:
        if args.json and os.path.exists(args.json):
            raise UsageError(f"--json {args.json} already exists; refusing to overwrite it")
        result = compare_systems(
            args.ref, args.baseline, args.system, args.test, args.n_samples, args.sacrebleu_tokenize
        )
    except UsageError as e:
        parser.error(str(e))
    print(
        f"paired {dict(bs='bootstrap resampling', ar='approximate randomisation')[args.test]}, "
        f"n={result['n_samples']}, sacrebleu tokenize={args.sacrebleu_tokenize}"
    )
    print(f"{'':<9} {'BLEU':>8} {'chrF':>8}")
    for row in ("baseline", "system", "p_value"):
        print(f"{row:<9} " + " ".join(f"{result[key][row]:>8.4f}" for key in ("bleu", "chrf")))
    print(f"BLEU signature: {result['signatures']['bleu']}\nchrF signature: {result['signatures']['chrf']}")
    if args.json:
        with open(args.json, "x", encoding="utf-8") as f:
            json.dump(result, f, indent=2)


def int_list(text):
    return [int(item) for item in text.split(",")]


def float_list(text):
    return [float(item) for item in text.split(",")]


def main(argv=None):
    """Returns None: console scripts exit with main()'s return value (Python callers: see
    run_greedy_vs_beam and compare_systems)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["compare"]:
        return compare_main(argv[1:])
    own, extra = (argv[: argv.index("--")], argv[argv.index("--") + 1 :]) if "--" in argv else (argv, [])
    parser = argparse.ArgumentParser(
        prog="ctemp-greedy-vs-beam",
        description=__doc__.split("\n\n")[0],
        usage="%(prog)s DATA --checkpoint CKPT [options] [-- fairseq-generate "
        "options]\n       %(prog)s compare --help",
        epilog=__doc__.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("data", metavar="DATA", help="binarized data (fairseq-preprocess --destdir)")
    parser.add_argument("--checkpoint", "--path", required=True, help="checkpoint (a.pt:b.pt: an ensemble)")
    parser.add_argument("--beam", type=int, default=5, help="beam size of the beam system (default 5)")
    parser.add_argument("--lenpen", type=float, default=1.0, help="length penalty of the beam system")
    parser.add_argument("--subset", default="test", help="subset to decode and score (default test)")
    parser.add_argument("--ref", help="raw reference file of --subset (detokenised scoring)")
    parser.add_argument("--temperature", type=float, help="decoding temperature (default: the training T)")
    parser.add_argument("--sacrebleu-tokenize", help="BLEU tokenizer (default: none; 13a with --ref)")
    parser.add_argument("--grid-beams", type=int_list, help="e.g. 2,4,6,8,10,12: pick beam and lenpen on dev")
    parser.add_argument("--grid-lenpens", type=float_list, help="e.g. 0.6,0.8,1.0,1.2,1.4")
    parser.add_argument("--dev-subset", default="valid", help="subset the grid decodes (default valid)")
    parser.add_argument("--dev-ref", help="raw reference file of --dev-subset")
    parser.add_argument("--save-dir", help="write greedy.hyp, beam.hyp, ref and fairseq-generate's logs here")
    parser.add_argument("--json", help="write all numbers and the signatures here (must not exist)")
    args = parser.parse_args(own)
    try:
        run_greedy_vs_beam(
            args.data,
            args.checkpoint,
            args.beam,
            args.subset,
            extra,
            args.lenpen,
            args.ref,
            args.temperature,
            args.sacrebleu_tokenize,
            args.grid_beams,
            args.grid_lenpens,
            args.dev_subset,
            args.dev_ref,
            args.save_dir,
            args.json,
        )
    except UsageError as e:
        parser.error(str(e))


if __name__ == "__main__":
    main()
