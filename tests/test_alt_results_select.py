"""ctemp-alt-results --experiments / --variants: which runs, comparisons and tuned systems remain
(on hand-made loaded experiments; the command end to end: test_alt_variants, test_bad_inputs)."""

import pytest
from conftest import experiment_json

from fairseq_ctemp.alt.common import AltError
from fairseq_ctemp.alt.records import Comparison, Experiment, RunResult, Settings, TrainingSummary
from fairseq_ctemp.alt.results import select


def experiment(name):
    def run(variant):  # what select reads: the variant
        training = TrainingSummary(0, "early stop", 10, 0, None, None, [])
        return RunResult(f"{variant}-run", "en-vi", variant, 1, 1.0, 0.1, 0.0, training)

    def comparison(variant):  # what select reads: the variant
        return Comparison("en-vi", name, variant, 1.0, f"{variant}-run", "transformer-run", "valid", {}, {})

    return Experiment(
        name=name,
        dir=name,
        exp=Settings(**experiment_json()),
        runs=[run("transformer"), run("lstm"), run("fixed_lstm:2.25")],
        pending=[run("fixed_lstm:1.5")],
        compare=[comparison("lstm"), comparison("fixed_lstm:2.25")],
        final="final.json",  # (select passes them on or drops them: any value will do)
        posthoc={"t": 1.2},
    )


EXPERIMENTS = [experiment("en-vi.seed2"), experiment("en-vi")]


def variants_of(e):
    return (
        [r.variant for r in e.runs],
        [r.variant for r in e.pending],
        [c.variant for c in e.compare],
    )


def test_nothing_selected_keeps_everything():
    assert select(EXPERIMENTS) == EXPERIMENTS


def test_experiments_by_name_in_the_directory_order():
    assert [e.name for e in select(EXPERIMENTS, names=["en-vi", "en-vi.seed2"])] == [
        "en-vi.seed2",
        "en-vi",
    ]
    assert select(EXPERIMENTS, names=["en-vi"]) == [EXPERIMENTS[1]]


def test_a_variant_name_matches_each_of_its_values_and_a_value_only_itself():
    (e,) = select(EXPERIMENTS, names=["en-vi"], variants=["lstm", "fixed_lstm"])
    assert variants_of(e) == (["lstm", "fixed_lstm:2.25"], ["fixed_lstm:1.5"], ["lstm", "fixed_lstm:2.25"])
    (e,) = select(EXPERIMENTS, names=["en-vi"], variants=["fixed_lstm:2.25"])
    assert variants_of(e) == (["fixed_lstm:2.25"], [], ["fixed_lstm:2.25"])


def test_t_opt_and_the_posthoc_row_go_with_the_transformer():
    (without,) = select(EXPERIMENTS, names=["en-vi"], variants=["lstm"])
    assert without.final is None and without.posthoc is None
    (with_it,) = select(EXPERIMENTS, names=["en-vi"], variants=["transformer"])
    assert with_it.final == "final.json" and with_it.posthoc == {"t": 1.2}
    assert EXPERIMENTS[1].final == "final.json"  # the loaded experiments are not changed


@pytest.mark.parametrize(
    "names, variants, message",
    [
        (
            ["en-ja"],
            None,
            "--experiments: no experiment en-ja in the working directory (it has: en-vi.seed2, en-vi)",
        ),
        (None, ["lstm", "gru"], "--variants: unknown gru (expected some of: transformer,"),
    ],
)
def test_unknown_names_are_refused(names, variants, message):
    with pytest.raises(AltError) as error:
        select(EXPERIMENTS, names=names, variants=variants)
    assert str(error.value).startswith(message)
