"""Greedy vs beam search of one checkpoint, as a library (the command: cli/greedy_vs_beam.py,
ctemp-greedy-vs-beam, whose help says what it measures and how): load_translator, decode,
run_greedy_vs_beam (BLEU, chrF and decoding speed of greedy and beam search, with an optional
beam x length-penalty grid on dev) and compare_systems (a paired significance test)."""

import glob
import json
import math
import os
import sys

from sacrebleu.metrics import BLEU, CHRF
from sacrebleu.significance import PairedTest

from . import inputs, translate
from .progress import progress_bar

# Set by this command for every decoding; after -- they would make the two systems differ silently.
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
    "decoding_temperatures",
)


class UsageError(Exception):
    """Bad input, existing output or a failed decoding: main() prints it as one error."""


def check(option, values, ok, allowed):
    for value in values:
        if not ok(value):
            raise UsageError(f"{option} must be {allowed}, got {value}")


def positive(x):
    return isinstance(x, (int, float)) and math.isfinite(x) and x > 0


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
    try:
        lines = inputs.read_utf8_lines(path)
    except inputs.InputError as e:
        raise UsageError(f"{option} {path}: {e}") from None
    if not lines:
        raise UsageError(f"{option} {path} is empty")
    if expected is not None and len(lines) != expected:
        raise UsageError(f"{option} {path} has {len(lines)} lines but there are {expected} sentences")
    return lines


def decoding_options(extra_args):
    """The options after -- as translate.DecodingOptions; UsageError for any this command sets or
    the API does not take."""
    for option in (arg.split("=")[0] for arg in extra_args):
        if option in OWN_OPTIONS:
            raise UsageError(f"{option} cannot go after --: this command sets it")
    try:
        return translate.decoding_options(extra_args)
    except translate.TranslateError as e:
        raise UsageError(f"after --: {e}") from None


def load_translator(data, checkpoint, extra_args=()):
    """The checkpoint(s) (a.pt:b.pt, an ensemble) loaded once for any number of decodings."""
    for path in checkpoint.split(":"):
        if not os.path.exists(path):
            raise UsageError(f"--checkpoint {path}: no such file")
        try:
            inputs.check_checkpoint(path)
        except inputs.InputError as e:
            raise UsageError(f"--checkpoint {path} {e}") from None
    options = decoding_options(extra_args)
    try:
        return translate.Translator(data, checkpoint.split(":"), **options.load_options())
    except Exception as e:  # e.g. a checkpoint of another vocabulary than DATA's: one line, no traceback
        raise UsageError(
            f"could not load --checkpoint {checkpoint} with the data {data}: {type(e).__name__}: {e}"
        ) from None


def decode(translator, subset, beam, lenpen, extra_args=(), temperature=None, progress=True):
    """One decoding of `subset` by a loaded translator: hypotheses and references in sentence
    order, with the numbers of SYSTEM_KEYS (but BLEU and chrF)."""
    try:
        out = translator.translate(
            subset,
            beam=beam,
            lenpen=lenpen,
            temperature=temperature,
            progress=progress,
            **decoding_options(extra_args).translate_options(),
        )
    except translate.TranslateError as e:
        raise UsageError(f"cannot decode {subset}: {e}") from None
    temperatures = out.temperatures
    return {
        "hyps": out.hypotheses,
        "refs": out.references,
        "beam": beam,
        "lenpen": lenpen,
        "n_sentences": out.n_sentences,
        "n_tokens": out.n_tokens,
        "decode_seconds": out.decode_seconds,
        "sentences_per_second": out.sentences_per_second,
        "tokens_per_second": out.tokens_per_second,
        "wall_seconds": out.wall_seconds,
        # one number when all models of an ensemble decode at the same temperature
        "decoding_temperature": temperatures[0] if len(set(temperatures)) == 1 else None,
        "decoding_temperatures": temperatures,
    }


def temperature_text(system):
    """T=2, or T=2,1 for an ensemble whose models decode at different temperatures."""
    return "T=" + ",".join(
        f"{t:g}" for t in system.get("decoding_temperatures") or [system["decoding_temperature"]]
    )


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
    translator=None,
    progress=True,
):
    """Decode `subset` with beam 1 and with `beam` (or the dev grid's best), score, print, save.

    Returns {"data", "checkpoint", "subset", "n_sentences", "references" ("T- lines" or the ref
    path), "tokenize", "signatures": {"bleu", "chrf"}, "systems": {"greedy": S, "beam": S},
    "speedup" (greedy / beam sentences per second, decode time), "speedup_wall" (beam / greedy
    wall time of the decodings, batching and post-processing included), "grid" (list of S on
    dev_subset; [] without a grid), "grid_best" ({"beam", "lenpen"} or None), "dev_subset",
    "dev_tokenize", "extra_args", "files" (name -> path written)}, where S = {"beam", "lenpen",
    "bleu", "chrf", "n_sentences", "n_tokens", "decode_seconds", "sentences_per_second",
    "tokens_per_second", "wall_seconds", "decoding_temperature" (None if the models of an ensemble
    differ), "decoding_temperatures" (per model)}. translator: the checkpoint already loaded
    (load_translator), e.g. to decode it several times; loaded here otherwise. progress: tqdm bars
    on a terminal. Raises UsageError (bad option, existing output, failed decoding)."""
    say = (lambda text: print(text, file=sys.stderr, flush=True)) if verbose else (lambda text: None)
    for path in data.split(":"):
        if not os.path.isdir(path):
            raise UsageError(f"DATA {path}: no such directory")
    for path in checkpoint.split(":"):
        if not os.path.exists(path):
            raise UsageError(f"--checkpoint {path}: no such file")
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
    decoding_options(extra_args)  # refused here, before anything is read or loaded
    grid_beams, grid_lenpens = list(grid_beams or [beam]), list(grid_lenpens or [lenpen])
    grid_points = [(b, lp) for b in grid_beams for lp in grid_lenpens] if grid else []
    names = ["greedy.hyp", "beam.hyp", "ref"] + [f"grid.beam{b}.lenpen{lp:g}.hyp" for b, lp in grid_points]
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
    translator = translator or load_translator(data, checkpoint, extra_args)
    lines = {}

    def run(role, beam_, lenpen_):
        say(f"decoding {subsets[role]} with beam {beam_}, lenpen {lenpen_:g} ...")
        out = decode(translator, subsets[role], beam_, lenpen_, extra_args, temperature, progress)
        if raw[role] is not None and len(raw[role]) != len(out["hyps"]):  # size was not known up front
            raise UsageError(
                f"{ref_options[role]} has {len(raw[role])} lines but {subsets[role]} has "
                f"{len(out['hyps'])} sentences"
            )
        out["refs"] = raw[role] or out["refs"]
        (out["bleu"], out["chrf"]), out["signatures"] = score(out["hyps"], out["refs"], tokenize_for[role])
        say(
            f"  BLEU {out['bleu']:.2f}, {out['sentences_per_second']:.1f} sentences/s, {temperature_text(out)}"
        )
        return out

    rows = []
    for b, lp in progress_bar(
        grid_points, f"grid on {dev_subset}", enabled=progress and len(grid_points) > 1
    ):
        rows.append(run("dev", b, lp))
        lines[f"grid.beam{b}.lenpen{lp:g}.hyp"] = rows[-1]["hyps"]
    if rows:
        best = max(rows, key=lambda row: row["bleu"])  # ties: the first one, i.e. the smaller beam
        beam, lenpen = best["beam"], best["lenpen"]
    greedy, beamed = run("test", 1, 1.0), run("test", beam, lenpen)
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
    lines.update({"greedy.hyp": greedy["hyps"], "beam.hyp": beamed["hyps"], "ref": greedy["refs"]})
    for name, path in files.items():
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        text = (
            json.dumps(result, indent=2) + "\n"
            if name == "json"
            else "".join(line + "\n" for line in lines[name])
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
        f"sacrebleu tokenize={result['tokenize']}, {temperature_text(systems['greedy'])}"
    )
    print(header)
    for name, system in systems.items():
        print(row.format(name, **system))
    print(
        f"speed: greedy decodes {result['speedup']:.2f}x as fast as beam {systems['beam']['beam']} "
        f"({result['speedup_wall']:.2f}x in wall time, batching and post-processing included)"
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
