"""The table ctemp-greedy-vs-beam prints."""

import dataclasses

from .decoding import temperature_text


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
