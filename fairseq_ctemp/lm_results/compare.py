"""`lm_results.py compare`: each variant's perplexity against a baseline's, with a paired bootstrap
over the sentences both were scored on (evaluate.sh's eval_SUBSET.sentences.tsv)."""

import csv
import os

from . import ResultsError
from .output import markdown_table, write_tables

COLUMNS = [
    *("baseline", "variant", "ppl_baseline", "ppl_variant", "ppl_ratio", "ratio_low", "ratio_high"),
    *("p_value", "sentences", "samples"),
]


def read_sentences(path):
    """(NLL in nats, tokens) per sentence, as numpy arrays, from evaluate.sh's sentences TSV."""
    import numpy as np

    if not os.path.exists(path):
        raise ResultsError(f"no {path} (evaluate.sh writes it; run it again for an older result)")
    with open(path) as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    return np.array([float(r["nll_nats"]) for r in rows]), np.array([int(r["tokens"]) for r in rows])


def paired_bootstrap(nll_a, nll_b, tokens, samples, seed):
    """Resample the sentences with replacement `samples` times; per resample, the difference of the
    per-token NLL (nats) of b and a. Returns (ppl ratio b / a, its 2.5 and 97.5 percentiles, the
    two-sided p-value of a difference of 0: twice the smaller share of resamples on either side)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    diffs = []
    for start in range(0, samples, 500):  # 500 resamples at a time: bounded memory
        idx = rng.integers(0, len(tokens), size=(min(500, samples - start), len(tokens)))
        diffs.append((nll_b[idx].sum(1) - nll_a[idx].sum(1)) / tokens[idx].sum(1))
    diffs = np.concatenate(diffs)
    observed = (nll_b.sum() - nll_a.sum()) / tokens.sum()
    p = min(1.0, 2 * min(float((diffs <= 0).mean()), float((diffs >= 0).mean())))
    low, high = np.percentile(diffs, [2.5, 97.5])
    return float(np.exp(observed)), float(np.exp(low)), float(np.exp(high)), p


def compare(runs, variants, subset, samples, seed, output):
    """output.md and output.csv: a row (COLUMNS) per variant after the first, the baseline."""
    import numpy as np

    if len(variants) < 2:
        raise ResultsError("--variants needs a baseline and at least one variant to compare")
    if samples < 100:
        raise ResultsError(f"--samples must be >= 100, got {samples}")
    name = f"eval_{subset}.sentences.tsv"
    scored = {v: read_sentences(os.path.join(runs, v, name)) for v in variants}
    baseline = variants[0]
    nll_a, tokens = scored[baseline]
    rows = []
    for variant in variants[1:]:
        nll_b, tokens_b = scored[variant]
        if not np.array_equal(tokens, tokens_b):
            raise ResultsError(f"{variant} and {baseline} were not scored on the same sentences ({name})")
        ratio, low, high, p = paired_bootstrap(nll_a, nll_b, tokens, samples, seed)
        rows.append(
            {
                "baseline": baseline,
                "variant": variant,
                "ppl_baseline": float(np.exp(nll_a.sum() / tokens.sum())),
                "ppl_variant": float(np.exp(nll_b.sum() / tokens.sum())),
                "ppl_ratio": ratio,
                "ratio_low": low,
                "ratio_high": high,
                "p_value": p,
                "sentences": len(tokens),
                "samples": samples,
            }
        )
    write_tables(output, COLUMNS, rows, markdown(rows, subset))


def markdown(rows, subset):
    header = [
        *("baseline", "variant", f"{subset} ppl, baseline", "variant", "ppl ratio", "95 % interval"),
        *("p", "sentences"),
    ]
    cells = [
        [r["baseline"], r["variant"], f"{r['ppl_baseline']:.2f}", f"{r['ppl_variant']:.2f}"]
        + [f"{r['ppl_ratio']:.4f}", f"{r['ratio_low']:.4f}–{r['ratio_high']:.4f}"]
        + [f"< {1 / r['samples']:g}" if r["p_value"] == 0 else f"{r['p_value']:.3g}", f"{r['sentences']:,}"]
        for r in rows
    ]
    return markdown_table(header, cells, text_columns=2)
