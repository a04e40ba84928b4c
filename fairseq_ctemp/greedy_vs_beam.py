"""Greedy vs beam search of one checkpoint, as a library (the command: cli/greedy_vs_beam.py,
ctemp-greedy-vs-beam, whose help says what it measures and how): load_translator, decode,
run_greedy_vs_beam (a Request in, a GreedyVsBeam out: BLEU, chrF and decoding speed of greedy and beam search, with an optional
beam x length-penalty grid on dev) and compare_systems (a paired significance test)."""

import dataclasses
import glob
import json
import math
import os
import sys
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence

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


class UsageError(Exception):
    """Bad input, existing output or a failed decoding: main() prints it as one error."""


@dataclass
class Request:
    """What ctemp-greedy-vs-beam decodes and writes (its options; the command's help says more)."""

    data: str  # fairseq-preprocess directory (several: a:b)
    checkpoint: str  # one checkpoint, or an ensemble a.pt:b.pt
    beam: int = 5
    subset: str = "test"
    extra_args: Sequence[str] = ()  # fairseq-generate options after --
    lenpen: float = 1.0
    ref: Optional[str] = None  # raw references of `subset` (default: the T- lines)
    temperature: Optional[float] = None  # decode at this T (default: the checkpoint's)
    tokenize: Optional[str] = None  # sacrebleu's (default 13a with --ref, else none)
    grid_beams: Optional[List[int]] = None  # with grid_lenpens: beam x lenpen tuned on dev
    grid_lenpens: Optional[List[float]] = None
    dev_subset: str = "valid"
    dev_ref: Optional[str] = None
    save_dir: Optional[str] = None  # hypotheses and references written here
    json_path: Optional[str] = None  # the GreedyVsBeam written here

    @property
    def grid(self):
        return bool(self.grid_beams or self.grid_lenpens)

    def grid_points(self):
        if not self.grid:
            return []
        return [(b, lp) for b in self.grid_beams or [self.beam] for lp in self.grid_lenpens or [self.lenpen]]


@dataclass
class System:
    """One decoding of a subset, scored."""

    beam: int
    lenpen: float
    bleu: float
    chrf: float
    n_sentences: int
    n_tokens: int
    decode_seconds: float  # the model's time, batching and post-processing left out
    sentences_per_second: float
    tokens_per_second: float
    wall_seconds: float  # the whole decoding
    decoding_temperature: Optional[float]  # None when the models of an ensemble differ
    decoding_temperatures: List[float]  # per model


@dataclass
class GreedyVsBeam:
    """The result of run_greedy_vs_beam, as written to --json."""

    data: str
    checkpoint: str
    subset: str
    n_sentences: int
    references: str  # the --ref path, or "T- lines"
    tokenize: str
    signatures: Dict[str, str]  # sacrebleu's, "bleu" and "chrf"
    systems: Dict[str, System]  # "greedy" and "beam"
    speedup: float  # greedy / beam sentences per second (decode time)
    speedup_wall: float  # beam / greedy wall time
    grid: List[System] = field(default_factory=list)  # on dev_subset; [] without a grid
    grid_best: Optional[Dict[str, float]] = None  # {"beam", "lenpen"}
    dev_subset: Optional[str] = None
    dev_tokenize: Optional[str] = None
    extra_args: List[str] = field(default_factory=list)
    files: Dict[str, str] = field(default_factory=dict)  # name -> path written

    def to_dict(self):
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d):
        """From a --json file (older files: every field of today's)."""
        return cls(
            **{
                **d,
                "systems": {name: System(**s) for name, s in d["systems"].items()},
                "grid": [System(**s) for s in d["grid"]],
            }
        )


@dataclass
class Decoded:
    """A decoding's hypotheses and references, in sentence order, with its scored System."""

    hyps: List[str]
    refs: List[Optional[str]]
    system: System
    signatures: Dict[str, str]


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
        inputs.check_checkpoint_option("--checkpoint", path, UsageError)
    options = decoding_options(extra_args)
    try:
        return translate.Translator(data, checkpoint.split(":"), **options.load_options())
    except Exception as e:  # e.g. a checkpoint of another vocabulary than DATA's: one line, no traceback
        raise UsageError(
            f"could not load --checkpoint {checkpoint} with the data {data}: {type(e).__name__}: {e}"
        ) from None


def decode(translator, subset, beam, lenpen, extra_args=(), temperature=None, progress=True):
    """One decoding of `subset` by a loaded translator (a translate.Translation)."""
    try:
        return translator.translate(
            subset,
            beam=beam,
            lenpen=lenpen,
            temperature=temperature,
            progress=progress,
            **decoding_options(extra_args).translate_options(),
        )
    except translate.TranslateError as e:
        raise UsageError(f"cannot decode {subset}: {e}") from None


def scored(out, beam, lenpen, refs, tokenize):
    """A decoding (translate.Translation) scored against one reference per sentence."""
    (bleu, chrf), signatures = score(out.hypotheses, refs, tokenize)
    temperatures = list(out.temperatures)
    system = System(
        beam=beam,
        lenpen=lenpen,
        bleu=bleu,
        chrf=chrf,
        n_sentences=out.n_sentences,
        n_tokens=out.n_tokens,
        decode_seconds=out.decode_seconds,
        sentences_per_second=out.sentences_per_second,
        tokens_per_second=out.tokens_per_second,
        wall_seconds=out.wall_seconds,
        decoding_temperature=temperatures[0] if len(set(temperatures)) == 1 else None,
        decoding_temperatures=temperatures,
    )
    return Decoded(out.hypotheses, refs, system, signatures)


def temperature_text(system):
    """T=2, or T=2,1 for an ensemble whose models decode at different temperatures."""
    return "T=" + ",".join(f"{t:g}" for t in system.decoding_temperatures or [system.decoding_temperature])


def score(hyps, refs, tokenize):
    """(BLEU, chrF) of hyps against one reference each, and the sacrebleu signatures."""
    if any(ref is None for ref in refs):
        raise UsageError("the subset has no target side (no T- lines): pass --ref / --dev-ref")
    bleu, chrf = BLEU(tokenize=tokenize), CHRF()
    scores = (bleu.corpus_score(hyps, [refs]).score, chrf.corpus_score(hyps, [refs]).score)
    return scores, {"bleu": str(bleu.get_signature()), "chrf": str(chrf.get_signature())}


def check_request(request):
    """Every option checked before anything is read, loaded or decoded."""
    for path in request.data.split(":"):
        if not os.path.isdir(path):
            raise UsageError(f"DATA {path}: no such directory")
    for path in request.checkpoint.split(":"):
        if not os.path.exists(path):
            raise UsageError(f"--checkpoint {path}: no such file")
    integer = lambda b: isinstance(b, int) and b >= 1  # noqa: E731
    check("--beam", [request.beam], integer, "an integer >= 1")
    check("--grid-beams", request.grid_beams or [], integer, "integers >= 1")
    check("--lenpen", [request.lenpen], positive, "a finite number > 0")
    check("--grid-lenpens", request.grid_lenpens or [], positive, "finite numbers > 0")
    temperature = [request.temperature] if request.temperature is not None else []
    check("--temperature", temperature, positive, "finite and > 0")
    tokenize = [request.tokenize] if request.tokenize else []
    check(
        "--sacrebleu-tokenize", tokenize, BLEU.TOKENIZERS.__contains__, f"one of {', '.join(BLEU.TOKENIZERS)}"
    )
    if request.dev_ref and not request.grid:
        raise UsageError("--dev-ref is only used with --grid-beams / --grid-lenpens")
    decoding_options(list(request.extra_args))


def output_files(request):
    """name -> path of every file the request writes, refused now if one exists or cannot be made."""
    names = ["greedy.hyp", "beam.hyp", "ref"] + [
        f"grid.beam{b}.lenpen{lp:g}.hyp" for b, lp in request.grid_points()
    ]
    files = {name: os.path.join(request.save_dir, name) for name in names} if request.save_dir else {}
    files.update({"json": request.json_path} if request.json_path else {})
    for path in files.values():
        if os.path.exists(path):
            raise UsageError(f"{path} already exists; refusing to overwrite it")
        parent = os.path.dirname(os.path.abspath(path))
        while not os.path.exists(parent):
            parent = os.path.dirname(parent)
        if not os.path.isdir(parent):  # found now, not after decoding
            raise UsageError(f"cannot write {path}: {parent} is a file, not a directory")
    return files


def run_greedy_vs_beam(request, translator=None, verbose=True, progress=True):
    """Decode request.subset with beam 1 and with request.beam (or the dev grid's best), score,
    print, save; a GreedyVsBeam. translator: the checkpoint already loaded (load_translator), e.g.
    to decode it several times; loaded here otherwise. progress: tqdm bars on a terminal. Raises
    UsageError (bad option, existing output, failed decoding)."""
    say = (lambda text: print(text, file=sys.stderr, flush=True)) if verbose else (lambda text: None)
    check_request(request)
    files = output_files(request)
    # Keyed by role, not by subset name: --dev-subset may be the test subset itself.
    subsets = {"test": request.subset, "dev": request.dev_subset}
    ref_options = {"test": "--ref", "dev": "--dev-ref"}
    roles = ("test", "dev") if request.grid else ("test",)
    sizes = {role: subset_size(request.data, subsets[role]) for role in roles}
    raw = {
        role: read_lines(path, ref_options[role], sizes[role]) if path else None
        for role, path in (("test", request.ref), ("dev", request.dev_ref))
    }
    tokenize_for = {role: request.tokenize or ("13a" if raw[role] else "none") for role in raw}
    extra_args = list(request.extra_args)
    translator = translator or load_translator(request.data, request.checkpoint, extra_args)

    def run(role, beam, lenpen):
        say(f"decoding {subsets[role]} with beam {beam}, lenpen {lenpen:g} ...")
        out = decode(translator, subsets[role], beam, lenpen, extra_args, request.temperature, progress)
        if raw[role] is not None and len(raw[role]) != len(out.hypotheses):  # size was not known up front
            raise UsageError(
                f"{ref_options[role]} has {len(raw[role])} lines but {subsets[role]} has "
                f"{len(out.hypotheses)} sentences"
            )
        decoded = scored(out, beam, lenpen, raw[role] or out.references, tokenize_for[role])
        system = decoded.system
        say(
            f"  BLEU {system.bleu:.2f}, {system.sentences_per_second:.1f} sentences/s, {temperature_text(system)}"
        )
        return decoded

    points = request.grid_points()
    grid = [
        run("dev", b, lp)
        for b, lp in progress_bar(
            points, f"grid on {request.dev_subset}", enabled=progress and len(points) > 1
        )
    ]
    best = max(grid, key=lambda d: d.system.bleu).system if grid else None  # ties: the smaller beam
    greedy = run("test", 1, 1.0)
    beamed = run("test", best.beam, best.lenpen) if best else run("test", request.beam, request.lenpen)
    result = greedy_vs_beam_result(request, (greedy, beamed, grid, best), tokenize_for, extra_args, files)
    lines = {f"grid.beam{d.system.beam}.lenpen{d.system.lenpen:g}.hyp": d.hyps for d in grid}
    lines.update({"greedy.hyp": greedy.hyps, "beam.hyp": beamed.hyps, "ref": greedy.refs})
    write_outputs(files, result, lines)
    if verbose:
        print_report(result)
    return result


def greedy_vs_beam_result(request, decoded, tokenize_for, extra_args, files):
    """The GreedyVsBeam of the decodings (greedy, beam, the dev grid's, the grid's best system)."""
    greedy, beamed, grid, best = decoded
    return GreedyVsBeam(
        data=request.data,
        checkpoint=request.checkpoint,
        subset=request.subset,
        n_sentences=len(greedy.hyps),
        references=request.ref or "T- lines",
        tokenize=tokenize_for["test"],
        signatures=greedy.signatures,
        systems={"greedy": greedy.system, "beam": beamed.system},
        speedup=greedy.system.sentences_per_second / beamed.system.sentences_per_second,
        speedup_wall=beamed.system.wall_seconds / greedy.system.wall_seconds,
        grid=[d.system for d in grid],
        grid_best={"beam": best.beam, "lenpen": best.lenpen} if best else None,
        dev_subset=request.dev_subset if best else None,
        dev_tokenize=tokenize_for["dev"] if best else None,
        extra_args=extra_args,
        files=files,
    )


def write_outputs(files, result, lines):
    for name, path in files.items():
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        if name == "json":
            text = json.dumps(result.to_dict(), indent=2) + "\n"
        else:
            text = "".join(line + "\n" for line in lines[name])
        with open(path, "x", encoding="utf-8") as f:  # "x": not even a file created meanwhile
            f.write(text)


def print_report(result):
    row = (
        "{:<7} {beam:>4} {lenpen:>6.2f} {bleu:>6.2f} {chrf:>6.2f} {decode_seconds:>9.2f} "
        "{sentences_per_second:>8.1f}"
    )
    header = f"{'system':<7} {'beam':>4} {'lenpen':>6} {'BLEU':>6} {'chrF':>6} {'decode s':>9} {'sent/s':>8}"
    if result.grid:
        print(
            f"grid on {result.dev_subset}, sacrebleu tokenize={result.dev_tokenize} "
            f"(* = best BLEU, the beam system below):\n{header}"
        )
        for system in result.grid:
            best = {"beam": system.beam, "lenpen": system.lenpen} == result.grid_best
            print(row.format("dev", **dataclasses.asdict(system)) + (" *" if best else ""))
        print()
    systems = result.systems
    print(
        f"{result.subset}: {result.n_sentences} sentences, references: {result.references}, "
        f"sacrebleu tokenize={result.tokenize}, {temperature_text(systems['greedy'])}"
    )
    print(header)
    for name, system in systems.items():
        print(row.format(name, **dataclasses.asdict(system)))
    print(
        f"speed: greedy decodes {result.speedup:.2f}x as fast as beam {systems['beam'].beam} "
        f"({result.speedup_wall:.2f}x in wall time, batching and post-processing included)"
    )
    print(f"BLEU signature: {result.signatures['bleu']}\nchrF signature: {result.signatures['chrf']}")
    if "ref" in result.files:
        files = result.files
        print(
            f"significance: ctemp-greedy-vs-beam compare --ref {files['ref']} --baseline "
            f"{files['beam.hyp']} --system {files['greedy.hyp']} --sacrebleu-tokenize {result.tokenize}"
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
