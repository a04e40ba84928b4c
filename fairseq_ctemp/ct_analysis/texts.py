"""The text an analysis scores: one sentence per line, and a translation model's sources."""

from dataclasses import dataclass
from typing import List, Optional

from .. import inputs
from . import AnalysisError


@dataclass
class Sentence:
    line: int  # 1-based line number in the text file
    words: List[str]
    source: Optional[List[str]] = None  # a translation model's source sentence (--source)


def read_text(path, lines=None, source=None):
    """Non-blank lines of ``path`` as Sentences; ``lines`` (1-based numbers) selects some;
    ``source``: the file of a translation model's source sentences, line by line beside ``path``."""
    all_lines = inputs.read_lines_option(
        "--text", path, AnalysisError, allow_empty=True
    )  # below: no non-blank line
    sources = read_source(source, path, len(all_lines)) if source else [None] * len(all_lines)
    sentences = [
        Sentence(i + 1, text.split(), sources[i]) for i, text in enumerate(all_lines) if text.strip()
    ]
    if not sentences:
        raise AnalysisError(f"--text {path} is empty (no non-blank line)")
    if lines is None:
        return sentences
    by_line = {s.line: s for s in sentences}
    chosen = []
    for n in lines:
        if not 1 <= n <= len(all_lines):
            raise AnalysisError(
                f"--line {n} is out of range: {path} has {len(all_lines)} lines (numbered from 1)"
            )
        if n not in by_line:
            raise AnalysisError(f"--line {n} of {path} is blank")
        chosen.append(by_line[n])
    return chosen


def read_source(path, text_path, n_lines):
    """The words of each line of --source, which has as many lines as --text."""
    lines = inputs.read_lines_option("--source", path, AnalysisError, allow_empty=True)  # below: the count
    if len(lines) != n_lines:
        raise AnalysisError(
            f"--source {path} has {len(lines)} lines, --text {text_path} {n_lines}: line N of one must "
            "be the translation of line N of the other"
        )
    return [line.split() for line in lines]
