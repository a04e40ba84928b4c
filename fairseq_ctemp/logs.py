"""fairseq's training logs read back: the statistics it logs per update ("train_inner"), per epoch
("train") and per validation ("valid").

    records = logs.read("ckpt/train.log", "valid")       # [{"epoch": 1.0, "valid_loss": 6.2, ...}]
    best = max(r["valid_bleu"] for r in logs.by_update(records, "valid_num_updates"))

Lines of ``--log-format json`` are read, and for "train" and "valid" also those of ``--log-format
simple`` (and none / tqdm, which print validations like simple). A record's keys are those of the
json format: prefixed with the kind for "train" and "valid" ("valid_loss", "train_num_updates"),
not for "train_inner" ("loss", "num_updates"), "epoch" never. Values that are numbers become floats
(fairseq writes most of them as strings); other lines, and a line cut short by a kill, are skipped.
"""

import json
import logging
import os
import re
import sys

KINDS = ("train_inner", "train", "valid")
EARLY_STOP = (
    "early stop since valid performance hasn't improved"  # fairseq-train's line when --patience ends a run
)
_SIMPLE_FIELD = re.compile(r"^(\S+) (\S+)$")  # "loss 6.543" of a simple-format "|"-separated line


def _number(value):
    try:
        return float(value)
    except (TypeError, ValueError):
        return value


def _json_record(text):
    try:
        record = json.loads(text)
    except json.JSONDecodeError:
        return None  # a line cut short
    return {key: _number(value) for key, value in record.items()} if isinstance(record, dict) else None


def _simple_record(text, kind):
    """'epoch 003 | valid on 'valid' subset | loss 6.543 | ... | num_updates 30' as the json record."""
    record = {}
    for field in text.split(" | "):
        match = _SIMPLE_FIELD.match(field.strip())
        if match:
            key, value = match.groups()
            record[key if key == "epoch" else f"{kind}_{key}"] = _number(value)
    return record or None


def parse(lines, kind):
    """The records of one kind (see the module's doc) in log lines: a text or an iterable of lines."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {', '.join(KINDS)}, got {kind!r}")
    marker = f"| {kind} | "
    records = []
    for line in lines.splitlines() if isinstance(lines, str) else lines:
        if marker not in line:
            continue
        rest = line.split(marker, 1)[1].strip()
        if rest.startswith("{"):
            record = _json_record(rest)
        elif kind != "train_inner":
            record = _simple_record(rest, kind)
        else:
            record = None  # simple-format per-update lines are not read
        if record:
            records.append(record)
    return records


def read(path, kind):
    """parse() of a log file (bytes that are not UTF-8 replaced)."""
    with open(path, encoding="utf-8", errors="replace") as f:
        return parse(f, kind)


def by_update(records, key):
    """One record per update, the latest (a resumed run logs again the updates after its last
    checkpoint), in update order; `key` holds the update ("num_updates", "valid_num_updates")."""
    latest = {}
    for record in records:
        if isinstance(record.get(key), float):
            latest[int(record[key])] = record
    return [latest[update] for update in sorted(latest)]


def use_fairseq_train_format():
    """Log as fairseq-train does (what read() parses back): fairseq_cli.train sets this format when
    it is imported first, but a program that imported the plugin first has fairseq's other one."""
    logging.basicConfig(
        format="%(asctime)s | %(levelname)s | %(name)s | %(message)s",
        datefmt="%Y-%m-%d %H:%M:%S",
        level=os.environ.get("LOGLEVEL", "INFO").upper(),
        stream=sys.stdout,
        force=True,
    )
