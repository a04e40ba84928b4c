"""Greedy vs beam search of one checkpoint, as a library (the command: cli/greedy_vs_beam.py,
ctemp-greedy-vs-beam, whose help says what it measures and how): load_translator, decode,
run_greedy_vs_beam (a Request in, a GreedyVsBeam out: BLEU, chrF and decoding speed of greedy and
beam search, with an optional beam x length-penalty grid on dev) and compare_systems (a paired
significance test). One job per module: records.py (what is asked and what comes out), checks.py
(every option checked before any work), decoding.py (fairseq's translation API, scored with
sacrebleu), run.py (the two systems and the grid, the files written), report.py (the printed table),
significance.py (the paired test)."""


class UsageError(Exception):
    """Bad input, existing output or a failed decoding: main() prints it as one error."""


from .checks import OWN_OPTIONS, check_subset, positive  # noqa: E402
from .decoding import decode, load_translator  # noqa: E402
from .records import GreedyVsBeam, Request, System  # noqa: E402
from .run import run_greedy_vs_beam  # noqa: E402
from .significance import compare_systems  # noqa: E402

__all__ = [
    "OWN_OPTIONS",
    "GreedyVsBeam",
    "Request",
    "System",
    "UsageError",
    "check_subset",
    "compare_systems",
    "decode",
    "load_translator",
    "positive",
    "run_greedy_vs_beam",
]
