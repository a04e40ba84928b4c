"""The generated tables of the results pages (scripts/results_pages.py) are what their result files
give, and the generator reads the files (a changed number changes the table)."""

import importlib.util
import os
import shutil

import pytest
from conftest import REPO


@pytest.fixture
def pages():
    spec = importlib.util.spec_from_file_location(
        "results_pages", os.path.join(REPO, "scripts", "results_pages.py")
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_generated_table_is_what_its_files_give(pages):
    pages.main(["--check"])  # exits with the stale tables' names otherwise
    marked = []
    for page in pages.PAGES:
        with open(os.path.join(REPO, page), encoding="utf-8") as f:
            marked += [m.group("name") for m in pages.BLOCK.finditer(f.read())]
    assert sorted(marked) == sorted(pages.TABLES)  # every table is on a page once, every marker has a table


def test_a_changed_result_changes_the_table_and_the_check_says_so(pages, tmp_path, monkeypatch):
    for table in pages.TABLES.values():
        for path in table.files:
            os.makedirs(tmp_path / os.path.dirname(path), exist_ok=True)
            shutil.copy(os.path.join(REPO, path), tmp_path / path)
    os.makedirs(tmp_path / "docs")
    for page in pages.PAGES:
        shutil.copy(os.path.join(REPO, page), tmp_path / page)
    monkeypatch.setattr(pages, "REPO", str(tmp_path))
    pages.main(["--check"])
    runs = tmp_path / pages.TABLES["ptb_runs"].files[0]
    text = runs.read_text(encoding="utf-8")
    assert ",85.12," in text
    runs.write_text(text.replace(",85.12,", ",85.13,", 1), encoding="utf-8")
    with pytest.raises(SystemExit, match="docs/results.md: ptb_runs"):
        pages.main(["--check"])
    pages.main([])  # regenerated: the page now says 85.13
    page = (tmp_path / "docs" / "results.md").read_text(encoding="utf-8")
    assert "| softmax | early stop | 49 | 49 | 90.10 / 85.13 |" in page
    pages.main(["--check"])


def test_p_values_of_zero_are_reported_as_below_the_resolution(pages):
    assert pages.p_text("0.0", 10000) == "< 0.0001"
    assert pages.p_text("0.0842", 10000) == "0.0842"


def test_a_seed_level_p_keeps_the_digits_its_verdict_rests_on(pages):
    assert pages.optional("0.0489117773413824", ".3g") == "0.0489"  # not 0.05 beside "higher"
    assert pages.optional("", ".3g") == "–"  # no test: the file leaves it empty


def test_the_ar_tar_table_puts_each_rows_two_settings_side_by_side(pages):
    def seeds_row(variant, seeds, ratio, p="", verdict="baseline"):
        return {
            "variant": variant,
            "seeds": seeds,
            "ratio_to_baseline": ratio,
            "p_value": p,
            "verdict": verdict,
        }

    with_ar_tar = [
        seeds_row("softmax", "1 2 3", "1.0"),
        seeds_row("ct", "1", "1.0361", verdict="no test: one seed"),
    ]
    without = [
        seeds_row("softmax", "1 2 3", "1.0"),
        seeds_row("constant-0.5", "1 2 3", "0.97", "0.0412", "lower"),
    ]
    assert pages.ptb_ar_tar([with_ar_tar, without])[2:] == [
        "| softmax | 1 2 3 | 1.0000 | – | baseline | 1 2 3 | 1.0000 | – | baseline |",
        "| CT | 1 | 1.0361 | – | no test: one seed | not run | – | – | – |",
        "| constant τ = 0.5 | not run | – | – | – | 1 2 3 | 0.9700 | 0.0412 | lower |",
    ]
