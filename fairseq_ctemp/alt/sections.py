"""The pieces of ctemp-alt-results' report: a table as CSV and as markdown, and a section (title,
table, caption, figures) made of them."""

import csv
import io
import os

from ..outputs import write_text


def markdown_table(header, rows):
    if any(len(row) != len(header) for row in rows):  # a cell under the wrong heading
        raise ValueError(f"a markdown row without one cell for each of the {len(header)} headings")
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(out)


def write_csv(path, header, rows):
    """Atomic, its folder made where missing (write_text)."""
    text = io.StringIO()
    writer = csv.writer(text)
    writer.writerow(header)
    writer.writerows(rows)
    write_text(path, text.getvalue())


def section(out, title, csv_name, table, caption, figures=(), csv_only=()):
    """A section of the report: the table (header, rows) written to out/csv_name, then its markdown
    (without the csv_only columns) under the title, the caption and the figures, each (png name,
    draw(path)). "" when the table has no rows."""
    header, rows = table
    if not rows:
        return ""
    write_csv(os.path.join(out, csv_name), header, rows)
    shown = [i for i, name in enumerate(header) if name not in csv_only]
    md_table = markdown_table([header[i] for i in shown], [[row[i] for i in shown] for row in rows])
    md = [f"## {title}\n", md_table + "\n", caption + "\n"]
    for png, draw in figures:
        draw(os.path.join(out, png))
        md.append(f"![{png}]({png})\n")
    return "\n".join(md) + "\n"
