"""The commands of the docs and READMEs are ones their programs take (a renamed option, variant or
keyword would leave a copied command failing):

- every fairseq command line (fairseq-train, -generate, -interactive, -eval-lm) parses with
  fairseq's own parser and the plugin loaded: the architectures, criteria, tasks and options it
  names exist; lines with placeholders ("...", $VARIABLES, words in capitals) are left out, and
  fairseq-hydra-train's commands are tests/test_hydra_configs.py's;
- every command line of the plugin's own tools (ctemp-*, pyproject's console scripts) is one the
  tool's parser takes: its main() runs until its command line is parsed and stops there, before
  any file is read; their placeholders stand for paths and names, so they are filled in ($EXP,
  WORK: exp, work), and a line with "..." is left out; the recipes that only run a tool
  (examples/alt/sweep.sh: ctemp-alt-sweep run) count as that tool, and examples/alt/run_all.sh
  and paper_scale.sh (on a stand-in CUDA device) give run_all.sh's stages (prepare.sh, sweep.sh)
  what their tools take;
- every command of the project's Python scripts (benchmarks/, scripts/, examples/), such as the
  ones that wrote a result, is one its script's parser takes;
- the Python blocks import what there is and call the plugin's functions with arguments their
  signatures take;
- each VARIABLE=value set before a recipe is one the recipes read, and the training recipes
  (examples/language_model/train.sh, examples/sact/train.sh) as the pages run them print
  (DRY_RUN=1) a command fairseq's training parser takes.

What a command checks after its parser (values that must go together) is tests/test_bad_inputs.py's."""

import argparse
import ast
import glob
import importlib
import inspect
import os
import re
import shlex
import shutil
import subprocess
import sys

import pytest
from conftest import (
    PLUGIN_DIR,
    REPO,
    code_block_lines,
    console_scripts,
    doc_pages,
    example_script,
    inline_code,
)
from fairseq import options

PARSERS = {
    "fairseq-train": options.get_training_parser,
    "fairseq-generate": options.get_generation_parser,
    "fairseq-interactive": options.get_interactive_generation_parser,
    "fairseq-eval-lm": options.get_eval_lm_parser,
}
SHELL_OPERATORS = {"|", "||", "&&", ";", "&"}
PLACEHOLDER = re.compile(r"\.\.\.|\$|\b[A-Z][A-Z_]{2,}\b")  # "...", $DATA, DATA_BIN, SAVE_DIR
# a recipe run with settings before it: "DEVICE_ARGS=--fp16 SRC=vi examples/sact/train.sh ..."
RECIPE_LINE = re.compile(r"^((?:[A-Z_][A-Z0-9_]*=\S*\s+)*)(\S+\.sh)\b")


def inline_lines():
    """[(file, span)] of the inline code of the docs and READMEs (outside their code blocks)."""
    return [(path, span) for path, text in doc_pages() for span in inline_code(text)]


def recipe_settings(line):
    """(recipe, {VARIABLE: value} set before it, where its command starts) of a line that runs a
    shell script, else None."""
    found = RECIPE_LINE.match(line)
    if not found:
        return None
    return found.group(2), dict(re.findall(r"([A-Z_][A-Z0-9_]*)=(\S*)", found.group(1))), found.end(1)


def documented_lines():
    """[(file, line)] of the fairseq commands in the docs' code blocks."""
    return [(path, line) for path, line in code_block_lines() if line.split(" ")[0] in PARSERS]


def documented_commands():
    """[(file, words)] of the documented lines without placeholders."""
    commands = []
    for path, line in documented_lines():
        words = shlex.split(line.replace("$(ctemp-user-dir)", PLUGIN_DIR), comments=True)
        shell = [i for i, w in enumerate(words) if w in SHELL_OPERATORS or w.startswith(("<", ">", "2>"))]
        words = words[: shell[0]] if shell else words  # the command, not its redirection or pipe
        if not PLACEHOLDER.search(" ".join(words)):
            commands.append((path, words))
    return commands


def test_the_commands_are_found():
    """The collector sees the README's tour and each method's page (it cannot pass on nothing)."""
    commands = documented_commands()
    assert {p for p, _ in commands} >= {
        "README.md",
        "docs/contextual_temperature.md",
        "docs/sact.md",
        "docs/softmax_tempering.md",
        "docs/translation_temperature.md",
    }
    assert {w[0] for _, w in commands} >= {"fairseq-train", "fairseq-generate", "fairseq-eval-lm"}
    assert len(commands) >= 15


@pytest.mark.parametrize(
    "path, words",
    documented_commands(),
    ids=[f"{p}:{w[0]}:{i}" for i, (p, w) in enumerate(documented_commands())],
)
def test_fairseq_parses_the_documented_command(path, words, monkeypatch):
    monkeypatch.chdir(REPO)  # --user-dir fairseq_ctemp, as run from a checkout
    argv = [os.path.join(REPO, w) if w == "fairseq_ctemp" else w for w in words[1:]]
    args = options.parse_args_and_arch(PARSERS[words[0]](), argv)
    assert os.path.samefile(args.user_dir, PLUGIN_DIR), (path, words)
    if "--arch" in argv:
        assert args.arch == argv[argv.index("--arch") + 1], (path, words)
    if "--criterion" in argv:
        assert args.criterion == argv[argv.index("--criterion") + 1], (path, words)


def documented_tool_commands():
    """[(file, words)] of the documented lines of the plugin's tools, placeholders filled in; a
    recipe that is one of them (examples/alt/sweep.sh: ctemp-alt-sweep run) as that tool."""
    tools = set(console_scripts()) - {"ctemp-user-dir"}  # (it takes no options)
    wrappers = tool_wrappers()
    commands = []
    for path, line in code_block_lines():
        first = line.split(" ")[0]
        if (first in tools or first in wrappers) and "..." not in line:
            words = shlex.split(fill_placeholders(line), comments=True)
            commands.append((path, wrappers.get(first, words[:1]) + words[1:]))
    return commands


def tool_wrappers():
    """{recipe: the tool's words} of the recipes that only run a tool: a shell script of examples/
    whose command is `exec "$python" -m fairseq_ctemp.cli.MODULE [SUBCOMMAND] "$@"`."""
    tool_of = {module: name for name, module in console_scripts().items()}
    wrappers = {}
    for script in sorted(glob.glob(os.path.join(REPO, "examples", "*", "*.sh"))):
        with open(script, encoding="utf-8") as f:
            found = re.search(r'^exec "\$python" -m (fairseq_ctemp\.cli\.\w+) (\w+ )?"\$@"$', f.read(), re.M)
        if found:
            sub = [found.group(2).strip()] if found.group(2) else []
            wrappers[os.path.relpath(script, REPO)] = [tool_of[found.group(1)], *sub]
    return wrappers


def fill_placeholders(line):
    """$EXP, ${R}, WORK (words in capitals): exp, r, work (they stand for paths and names)."""
    line = re.sub(r"\$\{?(\w+)\}?", lambda m: m.group(1).lower(), line)
    return re.sub(r"\b[A-Z][A-Z_]{2,}\b", lambda m: m.group(0).lower(), line)


def test_the_tool_commands_are_found():
    commands = documented_tool_commands()
    assert {w[0] for _, w in commands} >= {
        "ctemp-greedy-vs-beam",
        "ctemp-calibrate",
        "ctemp-ct-analysis",
        "ctemp-sact-heatmaps",
        "ctemp-alt-seeds",
        "ctemp-alt-sweep",
        "ctemp-average-checkpoints",
        "ctemp-alt-data",
        "ctemp-alt-results",
    }
    assert set(tool_wrappers()) >= {
        "examples/alt/sweep.sh",
        "examples/alt/results.sh",
        "examples/alt/prepare.sh",
    }
    assert len(commands) >= 30


class Parsed(Exception):
    """Raised where a tool's command line has been parsed: nothing after it runs."""


def stop_after_parsing(monkeypatch):
    """argparse's parse_args raises Parsed once it has parsed (an error still exits, status 2)."""
    parse_args = argparse.ArgumentParser.parse_args

    def parse_then_stop(self, args=None, namespace=None):
        parse_args(self, args, namespace)
        raise Parsed

    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", parse_then_stop)


def check_parses(main, argv, where, capsys):
    """main(argv), under stop_after_parsing, gets as far as its parsed command line; else the
    failure names the documented command (`where`) with argparse's error line."""
    try:
        main(argv)
    except Parsed:
        return
    except SystemExit as e:
        if e.code == 0 and argv[-1:] == ["--help"]:  # (argparse's help, printed)
            return
        error = capsys.readouterr().err.strip().splitlines()[-1:]  # "prog: error: ..."
        pytest.fail(f"{where}: exit {e.code}: {' '.join(error)}")
    pytest.fail(f"{where}: returned without parsing its command line")


@pytest.mark.parametrize(
    "path, words",
    documented_tool_commands(),
    ids=[f"{p}:{w[0]}:{i}" for i, (p, w) in enumerate(documented_tool_commands())],
)
def test_the_tool_parses_the_documented_command(path, words, monkeypatch, capsys):
    monkeypatch.chdir(REPO)  # --user-dir fairseq_ctemp, as run from a checkout
    argv = words[1:]
    if words[0] == "ctemp-calibrate":  # it reads the checkpoint before its fairseq parser (the task's)
        from fairseq_ctemp.cli import calibrate

        task = argv[argv.index("--task") + 1] if "--task" in argv else "translation"
        options.parse_args_and_arch(calibrate.fairseq_parser(task), argv)
        return
    if words[0] == "ctemp-greedy-vs-beam" and "--" in argv:  # its fairseq-generate options
        from fairseq_ctemp import translate

        translate.decoding_options(argv[argv.index("--") + 1 :])
    stop_after_parsing(monkeypatch)
    main = importlib.import_module(console_scripts()[words[0]]).main
    check_parses(main, argv, f"{path}: {shlex.join(words)}", capsys)


SCRIPT = re.compile(r"((?:[\w.-]+/)*[\w.-]+\.py)((?: [^`]*)?)$")


def project_scripts():
    """{name as the pages write it: path} of the project's Python commands (an argparse main):
    "benchmarks/bench_sact.py" and "bench_sact.py" alike."""
    found = {}
    for folder in ("benchmarks", "scripts", "examples/language_model", "examples/sact"):
        for name in os.listdir(os.path.join(REPO, folder)):
            path = os.path.join(folder, name)
            code = read(path) if name.endswith(".py") else ""
            if re.search(r"^def main\(", code, re.M) and "ArgumentParser" in code:
                found[path] = found[name] = path
    return found


def read(path):
    with open(os.path.join(REPO, path), encoding="utf-8") as f:
        return f.read()


def documented_script_commands():
    """[(file, script path, arguments)] of the project's Python commands the pages give with
    arguments: in code blocks, and inline where the script is a benchmark's (inline, the other
    scripts are named with a subcommand alone: "lm_results.py seeds"). Placeholders filled in as
    the tools' are; left out with "..."."""
    scripts, commands, inline = project_scripts(), [], inline_lines()
    for path, text in code_block_lines() + inline:
        line = text.split(" > ")[0].split(" | ")[0].strip()  # the command, not its redirection or pipe
        found = SCRIPT.search(line)
        if not found or found.group(1).split("/")[-1] not in scripts or "..." in found.group(2):
            continue
        if found.group(2).strip().startswith("(") or not all(
            "=" in w or "python" in w for w in line[: found.start()].split()
        ):
            continue  # named in a sentence or a listing ("lm_results.py (table, ...)"), not run
        script = scripts.get(found.group(1), scripts[found.group(1).split("/")[-1]])
        if found.group(2).strip() and ((path, text) not in inline or script.startswith("benchmarks/")):
            commands.append((path, script, shlex.split(fill_placeholders(found.group(2)), comments=True)))
    return commands


def test_the_script_commands_are_found():
    commands = documented_script_commands()
    assert {os.path.basename(script) for _, script, _ in commands} >= {
        *("bench_tempered_ce.py", "bench_sact.py", "bench_translation.py", "bench_ct_lm.py"),
        *("gpu_check.py", "trace_report.py", "lm_results.py", "export_hydra_configs.py"),
    }
    assert {path for path, _, _ in commands} >= {"docs/speed.md", "docs/gpu.md", "benchmarks/README.md"}


@pytest.mark.parametrize(
    "path, script, argv",
    documented_script_commands(),
    ids=[f"{p}:{os.path.basename(s)}:{i}" for i, (p, s, _) in enumerate(documented_script_commands())],
)
def test_the_script_parses_the_documented_command(path, script, argv, monkeypatch, capsys):
    monkeypatch.syspath_prepend(os.path.join(REPO, os.path.dirname(script)))  # its sibling modules
    monkeypatch.setattr(sys, "argv", [script, *argv])  # (main() reads sys.argv, as when run)
    monkeypatch.chdir(REPO)
    module = example_script(os.path.join(REPO, script))
    stop_after_parsing(monkeypatch)
    check_parses(lambda _: module.main(), argv, f"{path}: {script} {shlex.join(argv)}", capsys)


def python_blocks():
    """[(file, code)] of the docs' Python code blocks."""
    return [
        (path, block[len("python\n") :])
        for path, text in doc_pages()
        for block in text.split("```")[1::2]
        if block.startswith("python\n")
    ]


def test_the_python_blocks_are_found():
    assert {path for path, _ in python_blocks()} >= {"docs/calibration.md", "docs/softmax_tempering.md"}


@pytest.mark.parametrize("path, code", python_blocks(), ids=[p for p, _ in python_blocks()])
def test_the_documented_python_names_what_there_is(path, code):
    """Each name a block imports exists, and each call of an imported function or class (or of
    an attribute of one: calibration.calibrate, Calibration.from_dict) binds to its signature."""
    tree = ast.parse(code)
    imported = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            module = importlib.import_module(node.module)
            for alias in node.names:
                if not hasattr(module, alias.name):  # a submodule, imported by the import itself
                    importlib.import_module(f"{node.module}.{alias.name}")
                imported[alias.asname or alias.name] = getattr(module, alias.name)
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call)]
    for call in calls:
        target = resolve(call.func, imported, path)
        if target is not None:
            placeholders = [None] * len(call.args)
            keywords = {k.arg: None for k in call.keywords}
            inspect.signature(target).bind(*placeholders, **keywords)  # TypeError: not its arguments
    assert any(resolve(c.func, imported, path) is not None for c in calls) or not imported


def resolve(node, imported, path):
    """The object an expression of imported names and attributes stands for, else None."""
    if isinstance(node, ast.Name):
        return imported.get(node.id)
    if isinstance(node, ast.Attribute):
        owner = resolve(node.value, imported, path)
        if owner is None:
            return None
        assert hasattr(owner, node.attr), f"{path}: {ast.unparse(node.value)} has no {node.attr}"
        return getattr(owner, node.attr)
    return None


# read by torch, the C library or the shell, not by the recipes
STANDARD_VARIABLES = {"OMP_NUM_THREADS", "MKL_NUM_THREADS", "CUDA_VISIBLE_DEVICES", "PATH", "PYTHONPATH"}


def documented_recipe_variables():
    """[(file, recipe, variable)] of the VARIABLE=value settings before a documented recipe
    (a shell script of examples/): the recipes take their settings from the environment."""
    found = []
    for path, line in code_block_lines() + inline_lines():
        recipe, settings, _ = recipe_settings(line) or (None, {}, 0)
        found += [(path, recipe, name) for name in settings if name not in STANDARD_VARIABLES]
    return found


def test_each_documented_recipe_variable_is_one_a_recipe_reads():
    """A setting the recipes do not read would be ignored without a word (the environment takes
    any name), so each one the pages give is read by a recipe of the same folder, the shared
    shell functions, or the package that the recipe runs."""
    found = documented_recipe_variables()
    assert {name for _, _, name in found} >= {"DEVICE_ARGS", "PTB_DIR", "DRY_RUN"}
    read_by = {}
    for path, recipe, name in found:
        folder = os.path.dirname(os.path.join(REPO, recipe)) if "/" in recipe else None
        if folder not in read_by:
            sources = glob.glob(os.path.join(folder, "*.sh")) if folder else []
            sources += glob.glob(os.path.join(REPO, "examples", "*.sh"))
            sources += glob.glob(os.path.join(PLUGIN_DIR, "**", "*.py"), recursive=True)
            read_by[folder] = "\n".join(map(read, sources))
        assert re.search(rf"\b{name}\b", read_by[folder]), f"{path}: {name}= of {recipe} is read by nothing"


DRY_RUN_RECIPES = ("examples/language_model/train.sh", "examples/sact/train.sh")  # DRY_RUN=1: print it


def documented_training_recipes():
    """[(file, environment, words)] of the documented lines that run a training recipe with a
    DRY_RUN mode, without placeholders."""
    found = []
    for path, line in code_block_lines():
        recipe, environment, start = recipe_settings(line) or (None, {}, 0)
        if recipe in DRY_RUN_RECIPES:
            words = shlex.split(line[start:], comments=True)
            if not PLACEHOLDER.search(" ".join(words)):
                found.append((path, environment, words))
    return found


def test_the_training_recipes_are_found():
    assert {words[0] for _, _, words in documented_training_recipes()} == set(DRY_RUN_RECIPES)


@pytest.mark.parametrize(
    "path, environment, words",
    documented_training_recipes(),
    ids=[f"{p}:{w[0]}:{i}" for i, (p, _, w) in enumerate(documented_training_recipes())],
)
def test_the_documented_recipe_trains_with_a_command_fairseq_takes(path, environment, words, tmp_path):
    """The recipe, as the page runs it, prints (DRY_RUN=1) a ctemp-train command that fairseq's
    training parser takes with the plugin: its variant exists and makes options that exist."""
    env = {**os.environ, **environment, "DRY_RUN": "1"}
    proc = subprocess.run(
        [os.path.join(REPO, words[0]), *words[1:]], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert proc.returncode == 0, f"{path}: {shlex.join(words)}: {proc.stderr.strip()}"
    printed = shlex.split(proc.stdout.strip().splitlines()[-1])
    assert os.path.basename(printed[0]) == "ctemp-train", printed
    args = options.parse_args_and_arch(options.get_training_parser(), printed[1:])
    assert os.path.samefile(args.user_dir, PLUGIN_DIR), (path, printed)


# run_all.sh splits its options between the stages it runs: stand-ins for them record what each gets
STAGE_STAND_IN = 'printf "%s\\n" "$(basename "$0")" "$@" > "$(dirname "$0")/$(basename "$0" .sh).args"\n'
STAGE_TOOLS = {"prepare": ("ctemp-alt-data", "prepare"), "sweep": ("ctemp-alt-sweep", "run")}


def documented_recipe_commands(recipe):
    """[(file, words)] of the documented lines of examples/alt/RECIPE, placeholders filled in as
    the tools'."""
    return [
        (path, shlex.split(fill_placeholders(line), comments=True))
        for path, line in code_block_lines()
        if line.startswith(f"examples/alt/{recipe} ") and "..." not in line
    ]


def documented_recipe_params(recipe):
    """documented_recipe_commands(RECIPE) as pytest's parameters, each named FILE:INDEX."""
    commands = documented_recipe_commands(recipe)
    return [pytest.param(path, words, id=f"{path}:{i}") for i, (path, words) in enumerate(commands)]


def recipes_with_stand_in_stages(tmp_path, *recipes):
    """A copy of the ALT recipes named, whose stages (prepare.sh, sweep.sh, results.sh) are
    stand-ins that record what they are given; returns its folder."""
    folder = tmp_path / "examples" / "alt"
    folder.mkdir(parents=True)
    for name in (*recipes, "common.sh"):
        shutil.copy(os.path.join(REPO, "examples", "alt", name), folder / name)
    for stage in ("prepare", "sweep", "results"):
        (folder / f"{stage}.sh").write_text("#!/usr/bin/env bash\n" + STAGE_STAND_IN)
        (folder / f"{stage}.sh").chmod(0o755)
    return folder


def check_stages_parse(folder, command, monkeypatch, capsys):
    """What the stand-in stages were given is what ctemp-alt-data prepare and ctemp-alt-sweep run take."""
    stop_after_parsing(monkeypatch)
    for stage, (tool, subcommand) in STAGE_TOOLS.items():
        argv = [subcommand, *(folder / f"{stage}.args").read_text().splitlines()[1:]]
        main = importlib.import_module(console_scripts()[tool]).main
        check_parses(main, argv, f"{command}: its {stage}.sh gets {shlex.join(argv)}", capsys)


def test_the_run_all_commands_are_found():
    assert len(documented_recipe_commands("run_all.sh")) >= 5


@pytest.mark.parametrize("path, words", documented_recipe_params("run_all.sh"))
def test_run_all_passes_the_documented_command_on_as_its_stages_tools_take_it(
    path, words, tmp_path, monkeypatch, capsys
):
    """examples/alt/run_all.sh, as the page runs it, with its stages (prepare.sh, sweep.sh,
    results.sh) replaced by stand-ins: what it gives prepare.sh and sweep.sh their tools' parsers
    take (ctemp-alt-data prepare, ctemp-alt-sweep run)."""
    folder = recipes_with_stand_in_stages(tmp_path, "run_all.sh")
    proc = subprocess.run([folder / "run_all.sh", *words[1:]], capture_output=True, text=True)
    assert proc.returncode == 0, f"{path}: {shlex.join(words)}: {proc.stderr.strip()}"
    check_stages_parse(folder, f"{path}: {shlex.join(words)}", monkeypatch, capsys)


# paper_scale.sh's Python where it asks torch for the CUDA devices (here: one) and pip to install
# the --wheels (here: an empty --target made); anything else is the tests' Python
PYTHON_STAND_IN = """#!/usr/bin/env bash
case "$1 $2" in
  "-c "*cuda.device_count*) echo 0 ;;
  "-m pip") while [ $# -gt 0 ]; do [ "$1" != --target ] || mkdir -p "$2"; shift; done ;;
  *) exec {python} "$@" ;;
esac
"""


def test_the_paper_scale_commands_are_found():
    commands = documented_recipe_commands("paper_scale.sh")
    assert len(commands) >= 3 and any("--wheels" in words for _, words in commands)


@pytest.mark.parametrize("path, words", documented_recipe_params("paper_scale.sh"))
def test_paper_scale_passes_the_documented_command_on_as_its_stages_tools_take_it(
    path, words, tmp_path, monkeypatch, capsys
):
    """examples/alt/paper_scale.sh, as the page runs it on a machine with one CUDA device, through
    run_all.sh to stand-in stages: what prepare.sh and sweep.sh get, their tools take; every run
    goes to that device (--runs-per-gpu K: K runs side by side on it), and the results are packed."""
    folder = recipes_with_stand_in_stages(tmp_path, "paper_scale.sh", "run_all.sh")
    python = tmp_path / "python"
    python.write_text(PYTHON_STAND_IN.format(python=shlex.quote(sys.executable)))
    python.chmod(0o755)
    cwd = tmp_path / "cwd"
    for made in ("wheels", "runs/alt/sweep"):  # the --wheels folder; a sweep's result to pack
        (cwd / made).mkdir(parents=True)
    (cwd / "runs/alt/sweep/result.json").write_text("{}")
    env = dict(os.environ, PYTHON=str(python))
    env.pop("ALT_WORK", None)
    proc = subprocess.run(
        [folder / "paper_scale.sh", *words[1:]], cwd=cwd, env=env, capture_output=True, text=True
    )
    command = f"{path}: {shlex.join(words)}"
    assert proc.returncode == 0, f"{command}: {proc.stderr.strip()}"
    check_stages_parse(folder, command, monkeypatch, capsys)
    sweep = (folder / "sweep.args").read_text().splitlines()
    per_gpu = int(words[words.index("--runs-per-gpu") + 1]) if "--runs-per-gpu" in words else 1
    assert sweep[sweep.index("--gpus") + 1] == ",".join(["0"] * per_gpu), command
    results = words[words.index("--results") + 1]
    assert (cwd / results / "alt-results.tar.gz").is_file(), command
