"""ctemp-average-checkpoints picks the checkpoints upstream's script picks: the last N epoch or
update checkpoints, none after --checkpoint-upper-bound. In process, on small made-up checkpoints
whose weights are distinct powers of two, so that an average names exactly the files it used."""

import pytest
import torch

from fairseq_ctemp.cli import average_checkpoints

FILES = {  # name -> weight
    "checkpoint_1_10.pt": 1.0,
    "checkpoint_1_20.pt": 2.0,
    "checkpoint_2_30.pt": 4.0,
    "checkpoint_2_40.pt": 8.0,
    "checkpoint1.pt": 16.0,
    "checkpoint2.pt": 32.0,
    "checkpoint3.pt": 64.0,
    "checkpoint_last.pt": 128.0,
    "checkpoint_best.pt": 256.0,
}


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    directory = tmp_path_factory.mktemp("ckpt")
    for name, weight in FILES.items():
        torch.save(
            {"model": {"w": torch.full((3,), weight)}, "extra_state": {"name": name}}, directory / name
        )
    return directory


@pytest.mark.parametrize(
    "options, used",
    [
        (["--num-update-checkpoints", "2"], ["checkpoint_2_40.pt", "checkpoint_2_30.pt"]),
        (
            ["--num-update-checkpoints", "3", "--checkpoint-upper-bound", "30"],
            ["checkpoint_2_30.pt", "checkpoint_1_20.pt", "checkpoint_1_10.pt"],
        ),
        (["--num-epoch-checkpoints", "2"], ["checkpoint3.pt", "checkpoint2.pt"]),
        (
            ["--num-epoch-checkpoints", "2", "--checkpoint-upper-bound", "2"],
            ["checkpoint2.pt", "checkpoint1.pt"],
        ),
    ],
)
def test_selects_the_last_checkpoints_below_the_bound(checkpoints, tmp_path, capsys, options, used):
    output = tmp_path / "avg.pt"
    average_checkpoints.main(["--inputs", str(checkpoints), *options, "--output", str(output)])
    state = torch.load(output)
    expected = sum(FILES[name] for name in used) / len(used)
    torch.testing.assert_close(state["model"]["w"], torch.full((3,), expected))
    assert state["extra_state"] == {"name": used[0]}  # the rest is copied from the newest input
    assert (
        f"averaging {len(used)} checkpoints: " + " ".join(str(checkpoints / n) for n in used)
        in capsys.readouterr().err
    )


def test_too_few_checkpoints_below_the_bound_is_an_error(checkpoints, tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        average_checkpoints.main(
            [
                "--inputs",
                str(checkpoints),
                "--num-update-checkpoints",
                "3",
                "--checkpoint-upper-bound",
                "25",
                "--output",
                str(tmp_path / "avg.pt"),
            ]
        )
    assert exit_.value.code == 2
    assert f"found 2 checkpoint_E_U.pt files in {checkpoints}, need 3" in capsys.readouterr().err
    assert not (tmp_path / "avg.pt").exists()


def test_the_average_gets_the_mode_of_an_ordinary_file(checkpoints, tmp_path):
    """Written under a private temporary name, the average still ends with the mode the umask gives
    any new file (not mkstemp's 0600), like the checkpoints fairseq writes next to it."""
    import os

    old = os.umask(0o022)
    try:
        output = tmp_path / "avg.pt"
        average_checkpoints.main(
            ["--inputs", str(checkpoints), "--num-epoch-checkpoints", "2", "--output", str(output)]
        )
    finally:
        os.umask(old)
    assert output.stat().st_mode & 0o777 == 0o644
