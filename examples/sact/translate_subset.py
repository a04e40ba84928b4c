#!/usr/bin/env python
"""Beam-search every sentence of a binarized subset with one checkpoint through fairseq's Python API
(fairseq_ctemp.translate: task.build_generator and task.inference_step, as fairseq-generate decodes
with --user-dir fairseq_ctemp, at the model's training temperature) and write the post-processed
hypotheses in corpus order (fairseq-generate's D- lines).

Usage: python examples/sact/translate_subset.py DATA_BIN CHECKPOINT SUBSET BEAM LENPEN OUTPUT [options]
  options: fairseq-generate's that the API takes (-s/-t, --cpu, --fp16, --remove-bpe [X],
           --max-len-a, --max-len-b, --min-len, --batch-size, --max-tokens, --num-workers)
Refuses an existing OUTPUT. Prints what was decoded (sentences, temperature, decode time) as JSON.
"""

import json
import os
import sys

from fairseq_ctemp import greedy_vs_beam as gvb
from fairseq_ctemp import outputs, translate

PROG = "translate_subset.py"


def main(argv):
    if len(argv) < 6:
        sys.exit(__doc__.strip())
    data, checkpoint, subset, beam, lenpen, output, extra = *argv[:6], argv[6:]
    try:
        beam, lenpen = int(beam), float(lenpen)
        if beam < 1 or not gvb.positive(lenpen):
            raise ValueError
    except ValueError:
        sys.exit(
            f"{PROG}: error: BEAM must be an integer >= 1 and LENPEN a number > 0, got {argv[3]} {argv[4]}"
        )
    try:
        translate.decoding_options(extra)  # an option the API does not take: refused before loading
    except translate.TranslateError as e:
        sys.exit(f"{PROG}: error: {e}")
    if not os.path.isdir(data):
        sys.exit(f"{PROG}: error: DATA_BIN {data}: no such directory")
    try:
        gvb.check_subset("SUBSET", data, subset)
    except gvb.UsageError as e:
        sys.exit(f"{PROG}: error: {e}")
    if not os.path.isfile(checkpoint):
        sys.exit(f"{PROG}: error: CHECKPOINT {checkpoint}: no such file")
    if os.path.exists(output):
        sys.exit(f"{PROG}: error: {output} already exists; refusing to overwrite it")
    try:
        translator = gvb.load_translator(data, checkpoint, extra)
        out = gvb.decode(translator, subset, beam, lenpen, extra, progress=False)
    except gvb.UsageError as e:
        sys.exit(f"{PROG}: error: {e}")
    with outputs.all_or_none() as made, open(output, "x", encoding="utf-8") as f:
        made.append(output)  # removed again if cut short (a full disk): the rerun would refuse it
        f.writelines(hyp + "\n" for hyp in out.hypotheses)
    temperatures = set(out.temperatures)  # one, unless the models of an ensemble differ
    summary = {
        "subset": subset,
        "checkpoint": checkpoint,
        "beam": beam,
        "lenpen": lenpen,
        "n_sentences": out.n_sentences,
        "n_tokens": out.n_tokens,
        "decode_seconds": out.decode_seconds,
        "decoding_temperature": temperatures.pop() if len(temperatures) == 1 else None,
    }
    print(json.dumps(summary))


if __name__ == "__main__":
    main(sys.argv[1:])
