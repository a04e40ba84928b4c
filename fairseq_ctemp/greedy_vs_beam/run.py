"""run_greedy_vs_beam: the dev grid, greedy and beam on the subset, the files written."""

import json
import os
import sys

from .. import outputs
from ..progress import progress_bar
from . import UsageError
from .checks import check_request, output_files, read_lines, subset_size
from .decoding import decode, load_translator, scored, temperature_text
from .records import GreedyVsBeam
from .report import print_report


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
    """Every output file. If one cannot be written (a full disk), those written are removed again
    and the error names the file."""
    path = None
    try:
        with outputs.all_or_none() as made:
            for name, path in files.items():
                os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
                if name == "json":
                    text = json.dumps(result.to_dict(), indent=2) + "\n"
                else:
                    text = "".join(line + "\n" for line in lines[name])
                with open(path, "x", encoding="utf-8") as f:  # "x": not even a file created meanwhile
                    made.append(path)
                    f.write(text)
    except OSError as e:
        raise UsageError(outputs.not_written(path, e, made)) from None
