"""Two systems compared with the seed as the unit: Welch's t-test on one number per seed (a log
perplexity, a BLEU score), and the verdict the results pages quote; and, as a check of that
verdict, the paired t-test over the seeds both systems have (the runs of one seed share their batch
order, and those of one architecture their initial weights). Shared by the language-model and the
ALT results."""

import warnings

# A comparison decides only from this many seeds on each side: with two, Welch's test has about two
# degrees of freedom and rests on spreads that two points cannot show
MIN_SEEDS_TO_DECIDE = 3
# The confidence of the interval of the difference of the means: what an "inconclusive" rules out
CONFIDENCE = 0.95


def seed_test(values, base):
    """{welch_t, welch_df, p_value, verdict, ci_low, ci_high} of `values` (one per seed) against
    `base`'s; the verdict says "lower" or "higher" (values against base) only from
    MIN_SEEDS_TO_DECIDE seeds on each side and p < 0.05, else why not; ci_low and ci_high bound
    Welch's CONFIDENCE interval of mean(values) - mean(base)."""
    import numpy as np
    from scipy import stats

    values, base = np.asarray(values, dtype=float), np.asarray(base, dtype=float)
    if len(values) < 2:
        return {"verdict": "no test: one seed"}
    if len(base) < 2:
        return {"verdict": "no test: one seed of the baseline"}
    flat = np.ptp(values) == 0, np.ptp(base) == 0
    if all(flat):  # Welch's t would be infinite (or NaN)
        return {"verdict": "no test: no spread over the seeds"}
    with warnings.catch_warnings():
        # one side without spread (its variance is 0, the other's carries the test): scipy warns
        # that its data are nearly identical, which is what they are, not a loss of the result
        if any(flat):
            warnings.filterwarnings("ignore", "Precision loss occurred in moment calculation", RuntimeWarning)
        test = stats.ttest_ind(values, base, equal_var=False)
    if min(len(values), len(base)) < MIN_SEEDS_TO_DECIDE:
        verdict = f"inconclusive: fewer than {MIN_SEEDS_TO_DECIDE} seeds"
    elif test.pvalue >= 0.05:
        verdict = "inconclusive"
    else:
        verdict = "lower" if values.mean() < base.mean() else "higher"
    interval = test.confidence_interval(CONFIDENCE)
    return {
        "welch_t": float(test.statistic),
        "welch_df": float(test.df),
        "p_value": float(test.pvalue),
        "verdict": verdict,
        "ci_low": float(interval.low),
        "ci_high": float(interval.high),
    }


def paired_seed_test(values_by_seed, base_by_seed):
    """{paired_seeds, paired_t, paired_p}: the paired t-test on the differences over the seeds both
    {seed: value} have; only paired_seeds where it cannot be made (fewer than 2 such seeds, or
    differences without spread). A check of seed_test's verdict, which stays Welch's: the test the
    pages state beforehand."""
    import numpy as np
    from scipy import stats

    pairs = [
        (values_by_seed[s], base_by_seed[s]) for s in sorted(values_by_seed.keys() & base_by_seed.keys())
    ]
    if len(pairs) < 2:
        return {"paired_seeds": len(pairs)}
    values, base = np.array(pairs, dtype=float).T
    differences = values - base
    # t would be infinite (or NaN); equal differences of rounded BLEU differ by float rounding only
    if np.ptp(differences) <= 1e-9 * max(1.0, np.abs(differences).max()):
        return {"paired_seeds": len(pairs)}
    test = stats.ttest_rel(values, base)
    return {"paired_seeds": len(pairs), "paired_t": float(test.statistic), "paired_p": float(test.pvalue)}
