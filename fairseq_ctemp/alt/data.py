"""ALT data for the softmax-tempering recipes (ctemp-alt-data): the official train/dev/test split of
any language pair from the release or a local copy, normalised, checked, subword-segmented and
binarised for fairseq; every step written under a temporary name and never overwritten. The layout
and the checks: ctemp-alt-data --help."""

import codecs
import os
import random
import re
import shlex
import shutil
import unicodedata
import urllib.request
import zipfile

from ..option_errors import missing_directories, remove_empty
from ..preprocess import fairseq_preprocess
from ..progress import progress_bar
from ..toy_data import ToyLanguagePair
from .common import (
    FAIRSEQ_SUBSET,
    LANGUAGES,
    NICT,
    OFFICIAL_SIZES,
    RELEASE_ZIP,
    SPLITS,
    AltError,
    Lock,
    data_dir,
    data_tag,
    direction,
    fresh_dir,
    pair,
    read_json,
    say,
    write_json,
)

SNT = re.compile(r"SNT\.(\d+)\.(\d+)")
URL = re.compile(r"URL\.(\d+)")
SHOWN = 5  # ids / line numbers quoted in an error
MAX_AVERAGE_LINE = 2000  # bytes; ALT's longest sentence has ~1,100 (its average is ~150)


def normalise(text):
    """NFC, control characters and BOMs removed, any run of (Unicode) whitespace -> one space."""
    text = unicodedata.normalize("NFC", text)
    text = "".join(" " if unicodedata.category(ch) == "Cc" else ch for ch in text if ch != "\ufeff")
    return " ".join(text.split())


def decode_lines(data, name):
    """[(line number, text)] of a UTF-8 file, CR LF or LF line ends stripped; other encodings, other
    line ends (CR alone) and files that cannot be one sentence a line fail."""
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)) or b"\x00" in data[:4096]:
        raise AltError(
            f"{name} looks like UTF-16 (NUL bytes); the ALT files are UTF-8: convert it, "
            "e.g. iconv -f UTF-16 -t UTF-8"
        )
    if data.startswith(codecs.BOM_UTF8):
        data = data[len(codecs.BOM_UTF8) :]
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    check_line_ends(lines, len(data), name)
    out = []
    for number, raw in enumerate(lines, 1):
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise AltError(
                f"{name}, line {number}: not UTF-8 (byte 0x{raw[e.start]:02x} at column "
                f"{e.start + 1}); the ALT files are UTF-8: re-download the release or "
                "convert the file, e.g. iconv -f <its encoding> -t UTF-8"
            ) from None
        out.append((number, text[:-1] if text.endswith("\r") else text))
    return out


def check_line_ends(lines, size, name):
    """A CR that does not end a line means CR-only (old Mac) line ends or a damaged file: read as
    LF-separated, the whole file would pass as a few giant "sentences"."""
    for number, raw in enumerate(lines, 1):
        if b"\r" in raw[:-1]:
            where = "has CR-only line ends" if len(lines) == 1 else f"line {number} has a CR inside it"
            raise AltError(
                f"{name} {where}; lines must end in LF or CR LF: convert it, "
                "e.g. tr '\\r' '\\n' < FILE > FILE.lf"
            )
    if lines and size / len(lines) > MAX_AVERAGE_LINE:
        raise AltError(
            f"{name} has {len(lines)} lines for {size:,} bytes: not one sentence a line (wrong line ends?)"
        )


def listing(items):
    items = list(items)
    return ", ".join(map(str, items[:SHOWN])) + (f", ... ({len(items)} in all)" if len(items) > SHOWN else "")


# ----------------------------------------------------------------------------- corpus sources


class Release:
    """The official release: data_<code>.txt (in a directory or the zip) and URL-<split>.txt."""

    def __init__(self, path):
        self.path = path
        if not os.path.exists(path):
            raise AltError(f"--release {path}: no such file or directory")
        self.zip = zipfile.ZipFile(path) if zipfile.is_zipfile(path) else None
        if self.zip:
            self.members = {os.path.basename(n): n for n in self.zip.namelist() if not n.endswith("/")}
            search = [os.path.dirname(os.path.abspath(path))]
        elif os.path.isdir(path):
            search = [
                path,
                os.path.join(path, "ALT-Parallel-Corpus-20191206"),
                os.path.dirname(os.path.abspath(path)),
            ] + sorted(os.path.join(path, d) for d in os.listdir(path))
            search = [d for d in search if os.path.isdir(d)]
            self.data_dir = next(
                (
                    d
                    for d in search
                    if any(f.startswith("data_") and f.endswith(".txt") for f in os.listdir(d))
                ),
                None,
            )
            if self.data_dir is None:
                raise AltError(
                    f"--release {path}: no data_<lang>.txt files in it (or in its "
                    "ALT-Parallel-Corpus-20191206/); expected the unzipped "
                    f"{RELEASE_ZIP} or the zip itself"
                )
        else:
            raise AltError(f"--release {path}: neither a directory nor a zip file")
        self.url_files = {}
        for split in SPLITS:
            name = f"URL-{split}.txt"
            if self.zip and name in self.members:
                self.url_files[split] = ("zip", self.members[name])
                continue
            found = next(
                (os.path.join(d, name) for d in search if os.path.isfile(os.path.join(d, name))), None
            )
            if found is None:
                raise AltError(
                    f"--release {path}: {name} (the official split) not found next to "
                    f"the corpus; get it from {NICT}/{name} (ctemp-alt-data download does)"
                )
            self.url_files[split] = ("file", found)

    def describe(self):
        return {
            "kind": "release",
            "path": os.path.abspath(self.path),
            "url_lists": {s: v[1] for s, v in self.url_files.items()},
        }

    def file_names(self):
        names = self.members if self.zip else os.listdir(self.data_dir)
        return sorted(n for n in names if n.startswith("data_") and n.endswith(".txt"))

    def read(self, lang):
        name = f"data_{LANGUAGES[lang][0]}.txt"
        if self.zip:
            if name not in self.members:
                raise self.missing(lang, name)
            return name, self.zip.read(self.members[name])
        path = os.path.join(self.data_dir, name)
        if not os.path.isfile(path):
            raise self.missing(lang, name)
        with open(path, "rb") as f:
            return name, f.read()

    def missing(self, lang, name):
        return AltError(
            f"the release {self.path} has no {name} ({LANGUAGES[lang][1]}); it has: "
            f"{' '.join(self.file_names()) or 'no data_*.txt files'}"
        )

    def split_of_url(self):
        split_of = {}
        for split, (kind, where) in self.url_files.items():
            if kind == "zip":
                data = self.zip.read(where)
            else:
                with open(where, "rb") as f:
                    data = f.read()
            for number, line in decode_lines(data, f"URL-{split}.txt"):
                if not line.strip():
                    continue
                match = URL.fullmatch(line.split("\t")[0].strip())
                if not match:
                    raise AltError(
                        f"URL-{split}.txt, line {number}: expected 'URL.<id><TAB><url>', got {line[:60]!r}"
                    )
                urlid = match.group(1)
                if split_of.get(urlid, split) != split:
                    raise AltError(f"URL.{urlid} is in both URL-{split_of[urlid]}.txt and URL-{split}.txt")
                split_of[urlid] = split
        return split_of

    def sentences(self, lang):
        """{id: text} in file order; empty texts kept (as "") for the caller to judge."""
        name, data = self.read(lang)
        texts, lines = {}, {}
        for number, line in decode_lines(data, name):
            if not line.strip():
                continue  # a blank line carries no sentence id: nothing to align
            key, _, text = line.partition("\t")
            key = key.strip()
            if not SNT.fullmatch(key):
                raise AltError(
                    f"{name}, line {number}: expected 'SNT.<urlid>.<sentid><TAB><text>', got {line[:60]!r}"
                )
            if key in texts:
                raise AltError(f"{name}: sentence {key} appears twice (lines {lines[key]} and {number})")
            texts[key], lines[key] = normalise(text), number
        return name, texts

    def split(self, a, b, drop_incomplete):
        """{split: [(text_a, text_b)]} by the official URL lists, in the order of a's file."""
        split_of = self.split_of_url()
        (name_a, texts_a), (name_b, texts_b) = self.sentences(a), self.sentences(b)
        report, out = {"unassigned": 0, "dropped": {}}, {}
        for split in SPLITS:
            ids_a = [k for k in texts_a if split_of.get(k.split(".")[1]) == split]
            ids_b = [k for k in texts_b if split_of.get(k.split(".")[1]) == split]
            only_a = [k for k in ids_a if k not in texts_b]
            only_b = [k for k in ids_b if k not in texts_a]
            if (only_a or only_b) and not drop_incomplete:
                raise AltError(
                    f"misaligned {split} split: "
                    + "; ".join(
                        f"{len(ids)} sentence ids of {mine} are missing from {other} ({listing(ids)})"
                        for ids, mine, other in ((only_a, name_a, name_b), (only_b, name_b, name_a))
                        if ids
                    )
                    + ". Use the files of one release, or --drop-incomplete to drop these sentences"
                )
            both = [k for k in ids_a if k in texts_b]
            empty = [k for k in both if not texts_a[k] or not texts_b[k]]
            if empty and not drop_incomplete:
                raise AltError(
                    f"{split} split: {len(empty)} sentence pairs have an empty side "
                    f"({listing(empty)}); --drop-incomplete drops them (and says how many)"
                )
            report["dropped"][split] = len(only_a) + len(only_b) + len(empty)
            keep = [k for k in both if texts_a[k] and texts_b[k]]
            out[split] = [(texts_a[k], texts_b[k]) for k in keep]
        assigned = {k for k in texts_a if k.split(".")[1] in split_of}
        report["unassigned"] = len(texts_a) - len(assigned)
        if not assigned:
            raise AltError(
                f"no sentence of {name_a} belongs to a URL listed in URL-*.txt: wrong split files?"
            )
        return out, report


class LocalCopy:
    """Already split text: DIR/{train,dev[,test]}.<lang>, aligned by line."""

    def __init__(self, path):
        self.path = path
        if not os.path.isdir(path):
            raise AltError(f"--local {path}: no such directory")

    def describe(self):
        return {"kind": "local", "path": os.path.abspath(self.path)}

    def file(self, split, lang):
        for code in (lang, LANGUAGES[lang][0]):
            path = os.path.join(self.path, f"{split}.{code}")
            if os.path.isfile(path):
                return path
        return None

    def split(self, a, b, drop_incomplete):
        have = sorted({f.split(".", 1)[1] for f in os.listdir(self.path) if f.startswith("train.")})
        for lang in (a, b):
            if self.file("train", lang) is None:
                raise AltError(
                    f"--local {self.path} has no train.{lang} ({LANGUAGES[lang][1]}); "
                    f"its languages: {' '.join(have) or 'none (no train.<lang> files)'}"
                )
            if self.file("dev", lang) is None:
                raise AltError(f"--local {self.path} has train.{lang} but no dev.{lang}")
        has_test = [self.file("test", lang) is not None for lang in (a, b)]
        if has_test[0] != has_test[1]:
            raise AltError(
                f"--local {self.path}: test.{a if has_test[0] else b} but no test.{b if has_test[0] else a}"
            )
        out, report = {}, {"unassigned": 0, "dropped": {}}
        for split in SPLITS[: 3 if has_test[0] else 2]:
            sides = []
            for lang in (a, b):
                path = self.file(split, lang)
                with open(path, "rb") as f:
                    sides.append(
                        (os.path.basename(path), [normalise(t) for _, t in decode_lines(f.read(), path)])
                    )
            (name_a, lines_a), (name_b, lines_b) = sides
            if len(lines_a) != len(lines_b):
                raise AltError(
                    f"misaligned {split} split: {name_a} has {len(lines_a)} lines, {name_b} "
                    f"has {len(lines_b)} (the files must be aligned line by line)"
                )
            empty = [i + 1 for i, (x, y) in enumerate(zip(lines_a, lines_b)) if not x or not y]
            if empty and not drop_incomplete:
                raise AltError(
                    f"{split} split: {len(empty)} empty lines in {name_a} / {name_b} (line "
                    f"{listing(empty)}); --drop-incomplete drops these pairs"
                )
            report["dropped"][split] = len(empty)
            out[split] = [(x, y) for x, y in zip(lines_a, lines_b) if x and y]
        return out, report


def corpus_source(args):
    release = args.release or (None if args.local else os.environ.get("ALT_RELEASE"))
    local = args.local or (None if args.release else os.environ.get("ALT_LOCAL"))
    if getattr(args, "download", False):
        release = download(os.path.join(args.work, "download"))
    if release and local:
        raise AltError("give either --release or --local (or ALT_RELEASE / ALT_LOCAL), not both")
    if not (release or local):
        raise AltError(
            "no corpus: pass --release PATH (the NICT release zip or directory with "
            "URL-*.txt), --local DIR (already split train/dev[/test].<lang>), or --download; "
            "or set ALT_RELEASE / ALT_LOCAL"
        )
    return Release(release) if release else LocalCopy(local)


def download(dest):
    """The release zip and the three URL lists into dest (kept if already there)."""
    os.makedirs(dest, exist_ok=True)
    for name in (RELEASE_ZIP, "URL-train.txt", "URL-dev.txt", "URL-test.txt"):
        path = os.path.join(dest, name)
        if os.path.exists(path):
            continue
        say(f"downloading {NICT}/{name}")
        tmp = path + ".part"
        try:
            urllib.request.urlretrieve(f"{NICT}/{name}", tmp)
        except OSError as e:
            raise AltError(
                f"could not download {NICT}/{name}: {e}; download it by hand into {dest}"
            ) from None
        os.replace(tmp, path)
    return os.path.join(dest, RELEASE_ZIP)


# ----------------------------------------------------------------------------- steps


def step(path, what):
    """Run `what(tmp)` unless `path` exists; the result appears at `path` only when complete."""
    if os.path.exists(path):
        say(f"  {os.path.basename(path)}/ exists: skipped")
        return False
    tmp = fresh_dir(path + ".tmp")
    try:
        what(tmp)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)  # no half-made step is left behind
        raise
    os.replace(tmp, path)
    return True


def raw_texts(splits, a, b):
    """{file name in raw/: its text} of the split pairs."""
    return {
        f"{split}.{lang}": "".join(p[index] + "\n" for p in pairs)
        for split, pairs in splits.items()
        for index, lang in enumerate((a, b))
    }


def write_raw(tmp, texts):
    for name, text in texts.items():
        with open(os.path.join(tmp, name), "w", encoding="utf-8", newline="\n") as f:
            f.write(text)


def check_same_corpus(raw, texts, source, dest):
    """A prepared raw/ must be what the corpus gives now: anything else (another corpus, another
    version of it) would mix two corpora in one data directory."""
    have = sorted(n for n in os.listdir(raw) if n != "stats.json")
    for name in sorted(set(have) | set(texts)):
        path = os.path.join(raw, name)
        same = os.path.isfile(path) and name in texts
        if same:
            with open(path, encoding="utf-8", newline="") as f:
                same = f.read() == texts[name]
        if not same:
            raise AltError(
                f"{dest} was prepared from another corpus than {source.describe()['path']} "
                f"(its raw/{name} differs from what that corpus gives): use another --work, "
                "or the corpus it was prepared from"
            )


def train_spm(tmp, raw, langs, vocab, model_type, threads):
    import sentencepiece as spm

    for lang in langs:
        path = os.path.join(raw, f"train.{lang}")
        try:
            spm.SentencePieceTrainer.train(
                input=path,
                model_prefix=os.path.join(tmp, f"spm.{lang}"),
                vocab_size=vocab,
                model_type=model_type,
                character_coverage=0.9995 if lang in ("ja", "zh") else 1.0,
                num_threads=threads,
                minloglevel=2,
                seed_sentencepiece_size=1000000,
                input_sentence_size=2000000,
                shuffle_input_sentence=True,
            )
        except RuntimeError as e:
            raise AltError(
                f"sentencepiece could not learn {vocab} pieces from {path}: {e} (choose a smaller --vocab)"
            ) from None


def train_bpe(tmp, raw, langs, vocab):
    from subword_nmt.learn_bpe import learn_bpe

    for lang in langs:
        with open(os.path.join(raw, f"train.{lang}"), encoding="utf-8") as f, open(
            os.path.join(tmp, f"bpe.{lang}.codes"), "w", encoding="utf-8"
        ) as out:
            learn_bpe(f, out, vocab)


def encode(tmp, raw, sub, langs, subwords):
    for lang in langs:
        if subwords == "spm":
            import sentencepiece as spm

            model = spm.SentencePieceProcessor(model_file=os.path.join(sub, f"spm.{lang}.model"))
            segment = lambda line, model=model: " ".join(model.encode(line, out_type=str))  # noqa: E731
        else:
            from subword_nmt.apply_bpe import BPE

            with open(os.path.join(sub, f"bpe.{lang}.codes"), encoding="utf-8") as codes:
                bpe = BPE(codes)
            segment = bpe.process_line
        for split in SPLITS:
            path = os.path.join(raw, f"{split}.{lang}")
            if not os.path.exists(path):
                continue
            with open(path, encoding="utf-8") as f, open(
                os.path.join(tmp, f"{split}.{lang}"), "w", encoding="utf-8", newline="\n"
            ) as out:
                for line in f:
                    out.write(segment(line.rstrip("\n")).strip() + "\n")


def binarise(tmp, tok, a, b, has_test, workers):
    argv = [
        "--source-lang",
        a,
        "--target-lang",
        b,
        "--trainpref",
        os.path.join(tok, "train"),
        "--validpref",
        os.path.join(tok, "dev"),
        "--destdir",
        tmp,
        "--workers",
        str(workers),
    ]
    argv += ["--testpref", os.path.join(tok, "test")] if has_test else []
    try:
        fairseq_preprocess(argv)
    except Exception as e:
        raise AltError(f"fairseq-preprocess {shlex.join(argv)} failed: {e}") from None


def corpus_splits(source, a, b, args):
    """The pair's checked splits (before anything is written): {split: [(text_a, text_b)]}, info."""
    splits, info = source.split(a, b, args.drop_incomplete)
    empty = [split for split, pairs in splits.items() if not pairs]
    if empty:
        raise AltError(
            f"{source.describe()['path']}: the {' and '.join(empty)} split of {a}-{b} has no "
            "sentence pair"
            + (" left after --drop-incomplete" if args.drop_incomplete else "")
            + "; every split needs at least one"
        )
    if getattr(args, "carve_test", None):
        splits, info["test_source"] = carve_test(splits, args.carve_test, source)
    if args.train_subset:
        if args.train_subset > len(splits["train"]):
            raise AltError(f"--train-subset {args.train_subset} > {len(splits['train'])} training pairs")
        splits["train"] = splits["train"][: args.train_subset]
    info["sizes"] = {s: len(p) for s, p in splits.items()}
    info["source"] = source.describe()
    return splits, info


def carve_test(splits, n, source):
    """A test split carved from train: its last n pairs (ALT lists sentences article by article, so
    the carved articles stay whole but for the first), removed from train. Returns (splits, how)."""
    if "test" in splits:
        raise AltError(
            f"--carve-test {n}: {source.describe()['path']} has a test split of its own; "
            "score on it (leave out --carve-test) or remove it"
        )
    if n >= len(splits["train"]):
        raise AltError(f"--carve-test {n}: train has only {len(splits['train'])} pairs; carve fewer")
    splits = {**splits, "train": splits["train"][:-n], "test": splits["train"][-n:]}
    return splits, f"carved: the last {n} pairs of train, removed from train"


def check_options(dest, options):
    """The options a data directory was started (options.json) or finished (prepare.json) with must
    be these: checked before any step is skipped, so that a resumed prepare never mixes steps of
    two option sets."""
    for name in ("prepare.json", "options.json"):
        found = (read_json(os.path.join(dest, name)) or {}).get("options")
        if found is not None and found != options:
            differ = ", ".join(
                f"{k}: {found.get(k)!r}, now {options[k]!r}" for k in options if found.get(k) != options[k]
            )
            raise AltError(
                f"{dest} was {'prepared' if name == 'prepare.json' else 'started'} with other "
                f"options ({differ}); use another --work, or the options it was started with"
            )


def prepare(args):
    source = corpus_source(args)
    done = []
    for text in args.directions:
        src, tgt = direction(text)
        a, b = pair(src, tgt)
        if (a, b) in done:
            continue
        done.append((a, b))
        dest = data_dir(
            args.work, a, b, data_tag(args.subwords, args.vocab, args.train_subset, args.carve_test)
        )
        options = {
            "pair": f"{a}-{b}",
            "subwords": args.subwords,
            "vocab": args.vocab,
            "train_subset": args.train_subset,
            "drop_incomplete": args.drop_incomplete,
            "spm_model_type": args.spm_model_type if args.subwords == "spm" else None,
            **({"carve_test": args.carve_test} if args.carve_test else {}),  # older directories lack it
        }
        check_options(dest, options)
        splits, stats = corpus_splits(source, a, b, args)
        texts = raw_texts(splits, a, b)
        raw = os.path.join(dest, "raw")
        if os.path.isdir(raw):
            check_same_corpus(raw, texts, source, dest)
        if os.path.exists(os.path.join(dest, "prepare.json")):
            say(f"{a}-{b}: {dest} is ready (prepare.json exists, same options and corpus): nothing to do")
            continue
        say(f"{a}-{b} -> {dest}")
        made = missing_directories(dest)
        try:
            with Lock(dest):
                check_options(dest, options)  # another prepare may have started it meanwhile
                write_json(os.path.join(dest, "options.json"), {"options": options})
                prepare_pair(dest, a, b, texts, stats, options, args)
        except AltError:
            # refused input (e.g. a --vocab too large for sentencepiece): the directories made for
            # these options are of no use to a corrected command, which goes elsewhere
            if made:
                shutil.rmtree(made[0], ignore_errors=True)
                remove_empty(made[1:])
            raise


def prepare_pair(dest, a, b, texts, stats, options, args):
    """The steps of one data directory (locked, options checked); finished ones are skipped."""
    raw, sub, tok = (os.path.join(dest, d) for d in ("raw", "sub", "tok"))

    def make_raw(tmp):
        write_raw(tmp, texts)
        write_json(os.path.join(tmp, "stats.json"), stats)

    bar = progress_bar(None, f"{a}-{b}: raw text", total=4)  # the four steps
    step(raw, make_raw)
    bar.update()
    stats = read_json(os.path.join(raw, "stats.json"))
    sizes, has_test = stats["sizes"], "test" in stats["sizes"]
    say(
        f"  sentences: {', '.join(f'{s} {n:,}' for s, n in sizes.items())}"
        + ("" if has_test else " (no test split: the recipes will score the dev set)")
        + (f" (test {stats['test_source']})" if stats.get("test_source") else "")
    )
    if any(stats["dropped"].values()):
        say(f"  dropped pairs with an empty or missing side: {stats['dropped']}")
    if (
        stats["source"]["kind"] == "release"
        and not args.train_subset
        and [sizes.get(s) for s in SPLITS] != [OFFICIAL_SIZES[s] for s in SPLITS]
    ):
        say(f"  note: the official split has {OFFICIAL_SIZES}; this release gives {sizes}")
    bar.set_description(f"{a}-{b}: subword models")
    if args.subwords == "spm":
        step(sub, lambda tmp: train_spm(tmp, raw, (a, b), args.vocab, args.spm_model_type, args.workers))
    else:
        step(sub, lambda tmp: train_bpe(tmp, raw, (a, b), args.vocab))
    bar.update()
    bar.set_description(f"{a}-{b}: segmenting")
    step(tok, lambda tmp: encode(tmp, raw, sub, (a, b), args.subwords))
    bar.update()
    bar.set_description(f"{a}-{b}: fairseq-preprocess")
    step(os.path.join(dest, "bin"), lambda tmp: binarise(tmp, tok, a, b, has_test, args.workers))
    bar.update()
    bar.close()
    write_json(
        os.path.join(dest, "prepare.json"),
        {
            "options": options,
            "pair": [a, b],
            "source": stats["source"],
            "sizes": sizes,
            "has_test": has_test,
            "test_source": stats.get("test_source", "test split" if has_test else None),
            "dropped": stats["dropped"],
            "unassigned": stats["unassigned"],
            "remove_bpe": "sentencepiece" if args.subwords == "spm" else "subword_nmt",
            "subsets": {s: FAIRSEQ_SUBSET[s] for s in sizes},
            "bin": "bin",
            "raw": "raw",
        },
    )  # in this directory (common.prepared), so it can move
    say(f"  ready: {dest}/bin ({'train/valid/test' if has_test else 'train/valid, no test'})")


def check(args):
    source = corpus_source(args)
    for text in args.directions:
        a, b = pair(*direction(text))
        splits, info = source.split(a, b, args.drop_incomplete)
        print(
            f"{a}-{b}: OK, "
            + ", ".join(f"{s} {len(p):,}" for s, p in splits.items())
            + (f"; dropped {info['dropped']}" if any(info["dropped"].values()) else "")
            + (f"; {info['unassigned']} sentences in no URL list" if info["unassigned"] else "")
        )


def toy_language_pair(seed):
    """ctemp-toy-translation's synthetic pair, with a small vocabulary."""
    return ToyLanguagePair(vocab=40, seed=seed)


def toy_release(dest, sizes=(("train", 60), ("dev", 12), ("test", 12)), per_url=4, seed=1):
    """A tiny corpus in the exact release layout: DEST/ALT-Parallel-Corpus-20191206/data_{en,vi,ja}.txt
    (CRLF, "SNT.<urlid>.<sentid>\\t<text>", documents interleaved) and DEST/URL-{train,dev,test}.txt."""
    toy = toy_language_pair(seed)
    corpus = os.path.join(dest, "ALT-Parallel-Corpus-20191206")
    os.makedirs(corpus)
    documents, urlid = [], 70000
    for split, count in sizes:
        for first in range(0, count, per_url):
            urlid += 7
            documents.append(
                (split, urlid, [toy.sentence_pair(3, 8) for _ in range(min(per_url, count - first))])
            )
    random.Random(seed).shuffle(documents)  # as in the release, the splits' documents interleave
    lines, urls = {"en": [], "vi": [], "ja": []}, {s: [] for s, _ in sizes}
    for split, urlid, sentences in documents:
        urls[split].append(f"URL.{urlid}\thttp://en.wikinews.org/wiki/Story_{urlid}\r\n")
        for sentid, (src, tgt) in enumerate(sentences, 1):
            key = f"SNT.{urlid}.{sentid}"
            lines["en"].append(f"{key}\t{src}\r\n")
            lines["vi"].append(f"{key}\t{tgt}\r\n")
            lines["ja"].append(f"{key}\t{' '.join(reversed(tgt.split()))}\r\n")
    for lang, rows in lines.items():
        with open(os.path.join(corpus, f"data_{lang}.txt"), "w", encoding="utf-8", newline="") as f:
            f.writelines(rows)
    for split, rows in urls.items():
        with open(os.path.join(dest, f"URL-{split}.txt"), "w", encoding="utf-8", newline="") as f:
            f.writelines(rows)
    return dest
