"""evaluate.sh's evaluation: fairseq-eval-lm through its Python API (fairseq_ctemp.lm_eval), the
count of scored tokens checked, each line's NLL and tokens written next to the result.

Usage (by evaluate.sh): eval_checkpoint.py RESULT EXPECTED_TOKENS DATASET SUBSET CHECKPOINT
    TOKENS_PER_SAMPLE CONTEXT_WINDOW AUTO_DEVICE EVAL_LM_ARGS...
RESULT (a .json) is written once; where it exists, only its sentences file is written, and only if the
evaluation gives the recorded loss. AUTO_DEVICE 1: --cpu when torch sees no GPU.
"""

import json
import math
import os
import shlex
import sys
import time
import traceback

import torch

from fairseq_ctemp import lm_eval
from fairseq_ctemp.checkpoint_files import first_line
from fairseq_ctemp.lm_results.evaluation import Evaluation, read_evaluation

USAGE = (
    "usage: eval_checkpoint.py RESULT.json EXPECTED_TOKENS DATASET SUBSET CHECKPOINT TOKENS_PER_SAMPLE "
    "CONTEXT_WINDOW AUTO_DEVICE DATA [EVAL_LM_ARGS...] (run by evaluate.sh)"
)


def main(argv):
    if len(argv) < 9 or not argv[0].endswith(".json"):
        sys.exit(USAGE)
    result, expected, dataset, subset, checkpoint, tps, context, auto_device, *eval_args = argv
    if auto_device == "1" and not torch.cuda.is_available():  # in this process: no second torch start
        eval_args.append("--cpu")
    try:
        scored = lm_eval.evaluate(eval_args, sentences=True)
    except Exception as e:  # e.g. a translation model: its traceback into the log, then one line
        traceback.print_exc()
        sys.exit(
            f"evaluate.sh: error: {checkpoint} could not be evaluated on {eval_args[0]}: {first_line(e)}"
        )
    try:
        lm_eval.check(scored, int(expected), subset)
    except ValueError as e:
        sys.exit(f"evaluate.sh: error: {e}; not writing {result}")
    sentences = result[: -len(".json")] + ".sentences.tsv"
    if os.path.exists(result):  # an earlier result without its sentences: the same perplexity, or nothing
        recorded = read_evaluation(result).loss_base2
        if not math.isclose(recorded, scored.loss_base2, rel_tol=1e-6):
            sys.exit(
                f"evaluate.sh: error: {result} records loss {recorded} but the evaluation gives "
                f"{scored.loss_base2}: not writing {sentences}"
            )
    # Each file is written in full as FILE.partial first (a leftover of an interrupted run is
    # replaced), the result renamed before the sentences: an interruption leaves at most a result
    # without its sentences, which the rerun completes (above), never a file that blocks it.
    if os.path.exists(sentences):  # (evaluate.sh stops before; this script alone must not replace it)
        sys.exit(f"evaluate.sh: error: {sentences} exists: not replacing it")
    with open(sentences + ".partial", "w") as f:
        f.write("nll_nats\ttokens\n")
        f.writelines(f"{nll!r}\t{n}\n" for nll, n in scored.sentences)
    if not os.path.exists(result):  # else kept as it is
        write_result(
            result, evaluation_record(scored, dataset, subset, checkpoint, tps, context, expected, eval_args)
        )
    os.rename(sentences + ".partial", sentences)


def evaluation_record(scored, dataset, subset, checkpoint, tps, context, expected, eval_args):
    return Evaluation(
        dataset=dataset,
        subset=subset,
        checkpoint=checkpoint,
        tokens_per_sample=int(tps),
        context_window=int(context),
        evaluated_tokens=scored.tokens,
        expected_tokens=int(expected),
        positions_checked=scored.positions_checked,
        max_log_normalizer=scored.max_log_normalizer,
        tokens_not_finite=scored.tokens_not_finite,
        loss_base2=scored.loss_base2,
        ppl=scored.perplexity,
        command=shlex.join(["fairseq-eval-lm", *eval_args]),
        date=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    ).to_dict()


def write_result(result, record):
    with open(result + ".partial", "w") as f:
        json.dump(record, f, indent=1)
        f.write("\n")
    if os.path.exists(result):  # (checked above; not replaced if one appeared meanwhile)
        sys.exit(f"evaluate.sh: error: {result} appeared during the evaluation: not replacing it")
    os.rename(result + ".partial", result)
    print(json.dumps(record))


if __name__ == "__main__":
    main(sys.argv[1:])
