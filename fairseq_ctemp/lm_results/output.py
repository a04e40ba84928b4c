"""The tables of lm_results.py: PREFIX.csv for programs, PREFIX.md for pages, one number format."""

import csv
import os

from ..outputs import all_or_none


def write_csv(prefix, columns, rows):
    """PREFIX.csv with these columns (its directory made if needed)."""
    os.makedirs(os.path.dirname(os.path.abspath(prefix)) or ".", exist_ok=True)
    with open(prefix + ".csv", "w", newline="") as f:
        writer = csv.DictWriter(f, columns)
        writer.writeheader()
        writer.writerows(rows)


def fmt(value):
    """A cell: "–" for none, floats to 2 decimals from 10 on (else 5 significant digits), thousands
    separated in integers from 10,000."""
    if value is None:
        return "–"
    if isinstance(value, float):
        if 0 < abs(value) < 1e-3:
            return f"{value:.1e}"
        return f"{value:.2f}" if abs(value) >= 10 else f"{value:.5g}"
    if isinstance(value, int) and value >= 10000:
        return f"{value:,}"
    return str(value)


def markdown_table(header, rows, text_columns=1):
    """The lines of a markdown table: the first `text_columns` columns left-aligned, numbers right."""
    align = ["---"] * text_columns + ["---:"] * (len(header) - text_columns)
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(align) + "|"]
    for cells in rows:
        if len(cells) != len(header):  # a cell under the wrong heading
            raise ValueError(f"a markdown row of {len(cells)} cells under {len(header)} headings")
    return lines + ["| " + " | ".join(cells) + " |" for cells in rows]


def write_tables(prefix, columns, rows, lines):
    """PREFIX.csv (rows under columns) and PREFIX.md (lines), which are also printed; both or, where
    the writing fails, neither of those it made (a rerun is not refused for one of them)."""
    with all_or_none([prefix + ".csv", prefix + ".md"]):
        write_csv(prefix, columns, rows)
        with open(prefix + ".md", "w", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
