"""Every measured number on the project's pages (README.md, docs/*.md, the READMEs of examples/ and
benchmarks/) is in a committed result file: a CSV/JSON/TSV/Markdown/text file under a results
directory (examples/*/results*/, benchmarks/results*/) or a report (docs/*report*.md). A number
is traced when a number of some result file rounds to it at the page's precision (either sign, or
as a percentage of a fraction).

Stricter where the text names its source: a number of a paragraph, list item or table row that
links or names result files (a results folder or its README: the files under it, its learning
curves and a trace's op tables only where linked by name) is in those files (a paragraph that
names none: in those its section names), or in those of its table (a row: the files it, the rows
above it and its caption name, or that scripts/results_pages.py reads for a generated table), or
in those of the tables of its section (a paragraph discussing them). A
difference or a percentage change computed by hand is in no file: quote the two numbers, or the
ratio the file holds. A bound ("p < 0.0001") holds when a number of the files lies within it. A
p-value ("p = 0.23") is one of the files' p-values: a cell of a column headed p (p_value, paired p,
"p greedy vs T=1", ...), a JSON value of such a key, or a "p = ..." of their text.

Not measurements, so not checked: integers without thousands separators (sizes, years, ordinals;
where the text names its source, a count of 1,000 or more is checked, and so is an integer with a
unit of measure: "136 s", "96 %", "3 GiB", "9 min 33 s" as 573 s), numbers in code spans and
code blocks (a configuration value: `--max-update 20000`), in link targets, and those whose
sentence names a version, a paper's own figure or a prediction. A page that quotes a number no command of the project wrote fails here: rerun what
produced it, commit its file, or take the number out."""

import bisect
import csv
import glob
import io
import itertools
import json
import os
import re

from conftest import REPO, example_script

# the reports under docs/ are sources (written by make gpu-check), not pages to check
PAGES = (
    "README.md",
    *sorted(p for p in glob.glob("docs/*.md", root_dir=REPO) if "report" not in p),
    *sorted(glob.glob("examples/*/README.md", root_dir=REPO)),
    "benchmarks/README.md",
)
SOURCES = ("examples/*/results*/**/*", "benchmarks/results*/**/*", "docs/*report*.md")
SOURCE_TYPES = ("csv", "json", "tsv", "md", "txt")
NUMBER = re.compile(r"(?<![\w.])[-+]?\d+\.\d+(?![\w.])")
# in a result file also a ratio as the benchmarks print it: "0.529x"
SOURCE_NUMBER = re.compile(r"(?<![\w.])[-+]?\d+\.\d+(?=x\b|(?![\w.]))")
# the words before a number that say it is not one of ours (a version, a link, a paper's figure)
NOT_MEASURED = re.compile(
    r"(torch|Python|PyTorch|CUDA|abs/|arXiv:|doi\.org/|paper's|papers'|paper reports|submission's|predict|version)[^.;:]*$",
    re.I,
)


def result_files():
    """The committed result files (SOURCES), as normalised absolute paths."""
    return {
        os.path.normpath(path)
        for pattern in SOURCES
        for path in glob.glob(os.path.join(REPO, pattern), recursive=True)
        if os.path.isfile(path) and path.rsplit(".", 1)[-1] in SOURCE_TYPES
    }


def result_numbers():
    found = set()
    for path in result_files():
        with open(path, encoding="utf-8", errors="replace") as f:
            found.update(float(n) for n in SOURCE_NUMBER.findall(f.read().replace("−", "-")))
    return sorted(found)


def page_lines(page):
    """(line number, the line, the line without code spans and link targets) of a page's prose
    and tables (code blocks left out)."""
    with open(os.path.join(REPO, page), encoding="utf-8") as f:
        text = re.sub(r"```.*?```", lambda m: "\n" * m.group().count("\n"), f.read(), flags=re.S)
    # code spans, also those a paragraph wraps over lines
    plain = re.sub(r"`[^`\n]*(?:\n[^`\n]+)*`", lambda m: "\n" * m.group().count("\n"), text)
    for number, (line, prose) in enumerate(zip(text.splitlines(), plain.splitlines()), 1):
        yield number, line, re.sub(r"\]\([^)]*\)", "]", prose).replace("−", "-")


def measured(prose, match):
    return not NOT_MEASURED.search(prose[max(0, match.start() - 24) : match.start()])


def page_numbers(page):
    """(line number, text of the number, the line) of every measured number on the page."""
    for number, line, prose in page_lines(page):
        for match in NUMBER.finditer(prose):
            if measured(prose, match):
                yield number, match.group(), line


def traced_text(text, pool):
    """Whether the number `text` of a page is in `pool`: "1,883,928" and "85.12" at their
    precision; a bound, "≤ 0.001", when a number of the pool lies between 0 and it."""
    if " min " in text:  # "9 min 33 s": to the second
        minutes, _, seconds, _ = text.split()
        return traced(60 * int(minutes) + int(seconds), 0, pool)
    number = text.lstrip("<≤").replace(",", "")
    if text[0] in "<≤":  # a bound
        i = bisect.bisect_right(pool, float(number) + 1e-12)
        return i > 0 and pool[i - 1] >= 0
    return traced(float(number), len(number.split(".")[1]) if "." in number else 0, pool)


def traced(value, decimals, pool):
    tolerance = 0.5 * 10**-decimals + 1e-12
    for sign in (1, -1):  # a difference may be reported with either sign; a percentage as a fraction
        for scale in (1, 100, 0.01):
            target, width = value * sign / scale, tolerance / scale
            i = bisect.bisect_left(pool, target - width)
            if i < len(pool) and pool[i] <= target + width:
                return True
    return False


def test_every_measured_number_on_the_pages_is_in_a_result_file():
    pool = result_numbers()
    assert len(pool) > 1000  # the result files were found
    missing = [
        f"{page}:{line_number}: {text}  | {line.strip()[:100]}"
        for page in PAGES
        for line_number, text, line in page_numbers(page)
        if not traced(float(text), len(text.split(".")[1]), pool)
    ]
    assert not missing, "numbers in no result file:\n" + "\n".join(missing)


def test_the_check_finds_a_number_that_is_in_no_file():
    pool = result_numbers()
    assert traced(85.12, 2, pool)  # softmax's PTB test perplexity (examples/language_model/results)
    assert not traced(12345.678, 3, pool)


def test_a_ratio_as_the_benchmarks_print_it_is_read_from_a_result_file():
    found = [float(n) for n in SOURCE_NUMBER.findall("RATIO B/A 0.529x 1.2.3 v0.12x 2.50 7.5e")]
    assert found == [0.529, 2.5]


LINK = re.compile(r"\]\(([^)#]+)(?:#[^)]*)?\)")
GROUPED = r"[-+]?\d{1,3}(?:,\d{3})+(?:\.\d+)?"  # "73,760": one number, with thousands separators
MINUTES = r"\d+ min \d+ s(?![\w/])"  # "9 min 33 s": checked as seconds
CELL_NUMBER = re.compile(
    rf"(?<![\w.,]){MINUTES}|(?<![\w.,]){GROUPED}(?![\w])|(?<![\w.,])[-+]?\d+(?:\.\d+)?(?![\w])"
)
# in a result file's text or cell (a CSV's comma outside a cell separates two numbers)
FILE_NUMBER = re.compile(rf"(?<![\d,.]){GROUPED}(?![\d,])|[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")


def numbers_of(path):
    """The numbers of a result file: a CSV/TSV's cells, a JSON's numbers and the texts of its
    strings, another file's text; "73,760" in a text or cell is 73760."""
    with open(path, encoding="utf-8", errors="replace") as f:
        text = f.read().replace("−", "-")
    if path.endswith((".csv", ".tsv")):
        delimiter = "," if path.endswith(".csv") else "\t"
        texts = [cell for row in csv.reader(io.StringIO(text), delimiter=delimiter) for cell in row]
    elif path.endswith(".json"):
        texts = list(json_texts(json.loads(text)))
    else:
        texts = [text]
    return sorted(float(n.replace(",", "")) for t in texts for n in FILE_NUMBER.findall(t))


def json_texts(value):
    """A JSON document's numbers and strings (its keys too), each as a text."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield from json_texts(item)
    elif isinstance(value, list):
        for item in value:
            yield from json_texts(item)
    elif isinstance(value, str):
        yield value
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        yield repr(value)


# a p-value: the number after "p =", "p <" or "p ≤"; in a result file, a column (or JSON key) named
# p, p_value, paired_p, "p (greedy)", "p greedy vs T=1", "bootstrap p", ...; and "p = ..." in its text
P_BEFORE = re.compile(r"\bp ?(?:=|<|≤) ?$")
P_COLUMN = re.compile(r"(?:^|[\s(_])p(?:$|[\s(_)])|p_?value", re.I)
P_KEY = re.compile(r"(?:^|_)p(?:$|_)|p_?value", re.I)
P_TEXT = re.compile(rf"\bp(?:-value)? ?(?:=|<|≤) ?({FILE_NUMBER.pattern})")


def p_values_of(path):
    """The p-values of a result file (P_COLUMN, P_KEY, P_TEXT)."""
    with open(path, encoding="utf-8", errors="replace") as f:
        text = f.read().replace("−", "-")
    texts = P_TEXT.findall(text)
    if path.endswith((".csv", ".tsv")):
        rows = list(csv.reader(io.StringIO(text), delimiter="," if path.endswith(".csv") else "\t"))
        texts += p_cells(rows)
    elif path.endswith(".json"):
        texts += list(p_json_values(json.loads(text)))
    else:  # the markdown tables of the text
        rows = [[c.strip() for c in line.strip().strip("|").split("|")] for line in text.splitlines()]
        tables = itertools.groupby(rows, key=lambda r: len(r) > 1)
        texts += [cell for is_table, table in tables if is_table for cell in p_cells(list(table))]
    return sorted(float(n.replace(",", "")) for t in texts for n in FILE_NUMBER.findall(t))


def p_cells(rows):
    """The cells under the P_COLUMN headers of a table (its first row)."""
    columns = [i for i, header in enumerate(rows[0]) if P_COLUMN.search(header.strip())] if rows else []
    return [row[i] for row in rows[1:] for i in columns if i < len(row)]


def p_json_values(value):
    """A JSON document's numbers under P_KEY keys."""
    if isinstance(value, dict):
        for key, item in value.items():
            if P_KEY.search(key) and isinstance(item, (int, float)) and not isinstance(item, bool):
                yield repr(item)
            yield from p_json_values(item)
    elif isinstance(value, list):
        for item in value:
            yield from p_json_values(item)


GENERATOR = example_script(os.path.join(REPO, "scripts", "results_pages.py"))
GENERATED = re.compile(r"<!-- table: ([\w-]+) ")
CODE_SPAN = re.compile(r"`([^`]+)`")
BOUND = re.compile(r"([<≤]) ?$")  # "p < 0.0001": the number is a bound
ITEM = re.compile(r"\s*(?:[-*+]|\d+\.) ")
# in scoped prose: decimals, integers written with thousands separators (counts such as "9,100
# updates") and integers with a unit of measure (a time, a share, a ratio, a rate, a memory size);
# a plain "12" may be an ordinal, a year or a size
# (not a confidence level: "95 % interval", "95% CI")
UNIT = r"(?: ?(?:s|ms|words/s|tokens/s|sentences/s|GiB|MiB|GB|MB)(?![\w/])| ?%(?! interval| confidence| CI| bootstrap)|×)"
PROSE_NUMBER = re.compile(
    rf"(?<![\w.,]){MINUTES}|(?<![\w.,]){GROUPED}(?!\w|[.,]\d)|{NUMBER.pattern}"
    rf"|(?<![\w.,])\d+(?={UNIT}|[-–]\d+{UNIT})"  # "136 s"; both ends of "12-29 %"
)
BREAKS = ("#", "|", "<!--")  # a heading, a table row, a generator's marker: blocks of their own


def blocks(page):
    """The page's blocks: paragraphs, list items, table rows and headings, each a list of
    page_lines entries."""
    block = []
    for entry in page_lines(page):
        line = entry[1].strip()
        ends = not line or line.startswith(BREAKS) or ITEM.match(entry[1])
        if block and (ends or block[-1][1].lstrip().startswith(BREAKS)):
            yield block
            block = []
        if line:
            block.append(entry)
    if block:
        yield block


# bulk data (learning curves, a trace's op tables: thousands of numbers each) is a source only
# where a page links it by name; a folder's numbers in it would match a mistyped number by chance
BULK = re.compile(r"curves|\.ops\.csv$")


def covered(paths, known):
    """The result files of `paths`: a result file itself; for a folder, or a folder's README, every
    result file under that folder but its bulk data (BULK)."""
    files = set()
    for path in paths:
        folder = path if os.path.isdir(path) else os.path.dirname(path)
        if os.path.isdir(path) or os.path.basename(path) == "README.md":
            under = (k for k in known if k.startswith(folder + os.sep))
            files |= {k for k in under if not BULK.search(os.path.basename(k))}
        elif path in known:
            files.add(path)
    return files


def block_sources(block, folder, known):
    """The result files a block links or names in a code span."""
    text = " ".join(line for _, line, _ in block)
    linked = {os.path.normpath(os.path.join(folder, target)) for target in LINK.findall(text)}
    named = {
        os.path.normpath(os.path.join(REPO, w)) for span in CODE_SPAN.findall(text) for w in span.split()
    }
    return covered(linked | named, known)


def sections(page, known):
    """Per heading, [(block, the result files it names, those of its table: a row's own, those of
    the rows above it and its caption's, the block before the table, or what a generated table
    reads)]."""
    folder = os.path.dirname(os.path.join(REPO, page))
    section, caption = [], set()
    for block in blocks(page):
        first = block[0][1].lstrip()
        if first.startswith("#"):
            yield section
            section, caption = [], set()
        own = block_sources(block, folder, known)
        table = own | caption if first.startswith("|") else set()
        if table:
            caption = table  # a later row of the table may point at the files above ("the same")
        elif generated := GENERATED.match(first):  # a table of scripts/results_pages.py: what it reads
            caption = {os.path.join(REPO, f) for f in GENERATOR.TABLES[generated[1]].files}
        elif not first.startswith(BREAKS):
            caption = own
        section.append((block, own, table))
    yield section


def scoped_numbers(page, known):
    """(line number, number, line, its scope, whether it is a p-value) for each measured number of a
    section that names result files. The scope: a table row's table; a paragraph's own files, else
    its section's, with the section's tables, which its text may discuss. A row that links files
    itself is held to them in every number, its integers (counts, sizes) too."""
    for section in sections(page, known):
        names = set().union(*(own | table for _, own, table in section))
        tables = set().union(*(table for _, _, table in section))
        for block, own, table in section:
            scope = table or (own or names) | tables
            if not scope:
                continue  # only the check against every result file applies
            whole_row = bool(table and own)
            for line_number, line, prose in block:
                for match in (CELL_NUMBER if whole_row else PROSE_NUMBER).finditer(prose):
                    if whole_row or measured(prose, match):
                        bound = BOUND.search(prose[: match.start()])
                        is_p = bool(P_BEFORE.search(prose[: match.start()]))
                        yield line_number, (bound[1] if bound else "") + match.group(), line, scope, is_p


def untraced_in_scope(pages, known):
    """(checked, ["page:line: number | line"] of the numbers not in their scope's files)."""
    missing, checked, pools = [], 0, {}
    for page in pages:
        for line_number, text, line, scope, is_p in scoped_numbers(page, known):
            checked += 1
            key = (frozenset(scope), is_p)
            if key not in pools:
                read = p_values_of if is_p else numbers_of
                pools[key] = sorted({n for p in scope for n in read(p)})
            if not traced_text(text, pools[key]):
                missing.append(f"{page}:{line_number}: {text}  | {line.strip()[:100]}")
    return checked, missing


def test_a_number_is_in_the_result_files_its_paragraph_names():
    """Stricter than any result file: a number of a paragraph, list item or table row is in the
    result files it links or names (where it names none, those its section names), those of its
    table (a row) or those of the tables of its section (a paragraph that discusses them)."""
    checked, missing = untraced_in_scope(PAGES, result_files())
    assert checked > 1000  # the pages' scoped numbers were found
    assert not missing, "numbers not in the result files their paragraph names:\n" + "\n".join(missing)


def test_a_grouped_number_of_a_markdown_result_is_one_number(tmp_path):
    (tmp_path / "r.md").write_text("| 73,760 words | 1,883,928.5 | 3,1234 |\n")
    (tmp_path / "r.csv").write_text('73,760,"GPU 627 s + CPU 14,055 s"\n')
    (tmp_path / "r.json").write_text('{"a": [1,234], "b": "14,055 s", "c": 7.5e-06, "d": true}')
    assert numbers_of(str(tmp_path / "r.md")) == [3, 1234, 73760, 1883928.5]
    assert numbers_of(str(tmp_path / "r.csv")) == [73, 627, 760, 14055]
    assert numbers_of(str(tmp_path / "r.json")) == [7.5e-06, 1, 234, 14055]


def test_a_count_in_a_paragraph_is_checked_and_a_configuration_in_code_is_not(tmp_path):
    """9,100 and 8,000 are update counts of runs.csv; 1,100 (their difference) is in no file; an
    option's value in a code span is configuration, not a measurement."""
    runs = os.path.join(REPO, "examples", "alt", "results", "mini_en_vi_variants", "part3", "runs.csv")
    page = tmp_path / "page.md"
    page.write_text(
        f"# A section\n\nIt stopped after 9,100 updates against 8,000, 1,100 later, under "
        f"`--max-update 20000` ([runs]({runs})).\n"
    )
    checked, missing = untraced_in_scope([str(page)], result_files())
    assert checked == 3 and [m.split("  |")[0] for m in missing] == [f"{page}:3: 1,100"]


def test_the_scoped_check_wants_the_linked_file_not_any_file(tmp_path):
    """33.12 is a quickstart result (examples/quickstart/results), in no PTB file: a paragraph that
    links only a PTB file may not quote it, nor a table row whose caption links only that file."""
    ptb = os.path.join(REPO, "examples", "language_model", "results", "ptb_converged.csv")
    page = tmp_path / "page.md"
    page.write_text(
        f"# A section\n\nThe softmax: 85.12, the quickstart: 33.12 ([runs]({ptb})).\n\n"
        f"Caption ([runs]({ptb})).\n\n| a | b |\n|---|---|\n| 85.12 | 33.12 |\n\nNo source: 33.12.\n"
    )
    checked, missing = untraced_in_scope([str(page)], result_files())
    assert checked == 4
    assert [m.split("  |")[0] for m in missing] == [f"{page}:3: 33.12", f"{page}:9: 33.12"]
    assert traced(33.12, 2, result_numbers())  # what the check against every file alone accepts


def test_an_integer_with_a_unit_is_checked_and_minutes_and_seconds_are_read_as_seconds(tmp_path):
    """573.2 s is "9 min 33 s" and "573 s"; 96 % is the fraction 0.96; 136 s is in no file, nor the
    574 of the range "573-574 s"; a confidence level ("95 % interval") and a bare integer (a size, an
    ordinal) are not measurements."""
    result = tmp_path / "r.json"
    result.write_text('{"wall_seconds": 573.2, "share": 0.96}')
    page = tmp_path / "page.md"
    page.write_text(
        f"# A section\n\nIt took 9 min 33 s (573 s), 96 % of it in tests, the other run 136 s and 9 min "
        f"34 s, rounds of 573-574 s, with a 95 % interval (a 95% CI), on 2 cores ([run]({result})).\n\n"
        f"| run | wall |\n|---|---|\n| [one]({result}) | 9 min 33 s |\n| [two]({result}) | 9 min 35 s |\n"
    )
    checked, missing = untraced_in_scope([str(page)], {str(result)})
    assert checked == 9
    assert [m.split("  |")[0] for m in missing] == [
        f"{page}:3: 136",
        f"{page}:3: 9 min 34 s",
        f"{page}:3: 574",
        f"{page}:8: 9 min 35 s",
    ]


def test_a_folder_link_does_not_cover_its_learning_curves(tmp_path):
    """A learning-curve CSV holds thousands of numbers: 3.729 in one is no source for a paragraph
    that links its folder, only for one that links the CSV by name."""
    (tmp_path / "summary.csv").write_text("nll\n3.728\n")
    (tmp_path / "curves.en-vi.csv").write_text("update,nll\n100,3.729\n")
    (tmp_path / "trace.ops.csv").write_text("op,ms\nmm,3.731\n")
    page = tmp_path / "page.md"
    page.write_text(
        f"# A section\n\nNLL 3.728, 3.729 and 3.731 ([runs]({tmp_path})).\n\n"
        f"NLL 3.729 ([curves]({tmp_path / 'curves.en-vi.csv'})).\n"
    )
    known = {str(p) for p in tmp_path.iterdir() if p.suffix == ".csv"}
    checked, missing = untraced_in_scope([str(page)], known)
    assert checked == 4
    assert [m.split("  |")[0] for m in missing] == [f"{page}:3: 3.729", f"{page}:3: 3.731"]


def test_a_p_value_is_one_of_the_files_p_values(tmp_path):
    """0.23 is a BLEU-like cell of r.csv, not a p-value: "p = 0.23" fails, "0.23" alone traces; the
    p-values of a CSV column, a markdown table's column, a JSON key and a text's "p = ..." trace."""
    (tmp_path / "r.csv").write_text("system,score,p greedy vs T=1\nA,0.23,0.0412\n")
    (tmp_path / "r.md").write_text(
        "| row | ratio | paired p (seeds) |\n|---|---|---|\n| x | 1.5 | 0.118 (3) |\n"
    )
    (tmp_path / "r.json").write_text('{"compare": {"p_value": 0.0071, "bleu": 0.5}}')
    (tmp_path / "r.txt").write_text("bootstrap: p = 0.0019 over 1000 samples\n")
    page = tmp_path / "page.md"
    page.write_text(
        f"# A section\n\nScore 0.23 (p = 0.0412), p = 0.118, p = 0.0071, p = 0.0019, p = 0.23, "
        f"p = 0.5 ([runs]({tmp_path})).\n"
    )
    known = {str(p) for p in tmp_path.iterdir() if p.name.startswith("r.")}
    checked, missing = untraced_in_scope([str(page)], known)
    assert checked == 7
    assert [m.split("  |")[0] for m in missing] == [f"{page}:3: 0.23", f"{page}:3: 0.5"]
    assert p_values_of(str(tmp_path / "r.md")) == [0.118, 3]  # (a cell's numbers: its seed count too)
