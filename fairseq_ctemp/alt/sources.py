"""Where the ALT corpus comes from (ctemp-alt-data): the official release (a directory or its zip,
downloaded when asked) or a local copy of its splits, read with its encoding and line ends checked
and normalised, and split into train, dev and test by the release's URL lists."""

import codecs
import os
import re
import unicodedata
import urllib.request
import zipfile

from .common import (
    LANGUAGES,
    NICT,
    RELEASE_ZIP,
    SPLITS,
    AltError,
    say,
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
    if getattr(args, "download", False):  # (the CLI refuses it with --release or --local)
        return Release(download(os.path.join(args.work, "download")))  # before ALT_RELEASE / ALT_LOCAL
    release = args.release or (None if args.local else os.environ.get("ALT_RELEASE"))
    local = args.local or (None if args.release else os.environ.get("ALT_LOCAL"))
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
