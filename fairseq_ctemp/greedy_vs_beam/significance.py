"""compare_systems: the paired significance test of two hypothesis files (sacrebleu)."""

from sacrebleu.metrics import BLEU, CHRF
from sacrebleu.significance import PairedTest

from .checks import check, read_lines


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
