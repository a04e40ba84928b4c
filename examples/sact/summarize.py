#!/usr/bin/env python
"""One table for the SACT recipes: per variant, sacrebleu BLEU and chrF of SUBSET (from evaluate.sh),
the last validation loss and update count (from train.log) and the training time (time.txt, if any).

Usage: python examples/sact/summarize.py WORK_DIR SUBSET BEAM VARIANT [VARIANT ...]
"""

import json
import os
import sys

from fairseq_ctemp import logs


def main(argv):
    if len(argv) < 4:
        sys.exit(__doc__.strip())
    work, subset, beam, variants = argv[0], argv[1], argv[2], argv[3:]
    if not os.path.isdir(work):
        sys.exit(f"summarize.py: error: WORK_DIR {work}: no such directory")
    print(f"{subset}, beam {beam}:")
    print(f"{'variant':<14} {'BLEU':>6} {'chrF':>6} {'valid loss':>10} {'updates':>7}  training time")
    signatures = None
    for variant in variants:
        run = os.path.join(work, variant.replace(":", ""))
        scores = os.path.join(run, f"{subset}.beam{beam}.json")
        if not os.path.exists(scores):
            print(f"{variant:<14} (no {scores} yet)")
            continue
        with open(scores) as f:
            bleu, chrf = json.load(f)
        signatures = bleu["signature"], chrf["signature"]
        log = os.path.join(run, "train.log")
        valid = logs.read(log, "valid") if os.path.exists(log) else []  # json or simple format
        loss, updates = (
            (f"{valid[-1]['valid_loss']:g}", int(valid[-1]["valid_num_updates"])) if valid else ("?", "?")
        )
        timing = os.path.join(run, "time.txt")
        if os.path.exists(timing):
            with open(timing) as f:
                timing = f.read().strip()
        else:
            timing = ""
        print(f"{variant:<14} {bleu['score']:>6.2f} {chrf['score']:>6.2f} {loss:>10} {updates:>7}  {timing}")
    if signatures:
        print(f"BLEU: {signatures[0]}\nchrF: {signatures[1]}")


if __name__ == "__main__":
    main(sys.argv[1:])
