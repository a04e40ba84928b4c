"""Shared by the ALT recipes (scripts/alt_data.py, alt_sweep.py, alt_results.py): language codes,
directory layout, tools, atomic writes. Not a command itself."""
import json
import os
import shutil
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PLUGIN_DIR = os.path.join(REPO, "fairseq_ctemp")

# Our language codes -> the code in the release's file names (data_<code>.txt) and the name.
# The release calls Bengali "bg" (not Bulgarian) and Khmer "khm"; both spellings are accepted.
LANGUAGES = {
    "en": ("en", "English"), "bn": ("bg", "Bengali"), "fil": ("fil", "Filipino"),
    "hi": ("hi", "Hindi"), "id": ("id", "Indonesian"), "ja": ("ja", "Japanese"),
    "km": ("khm", "Khmer"), "lo": ("lo", "Lao"), "ms": ("ms", "Malay"), "my": ("my", "Burmese"),
    "th": ("th", "Thai"), "vi": ("vi", "Vietnamese"), "zh": ("zh", "Chinese"),
}
ALIASES = {"bg": "bn", "khm": "km"}
PAPER_LANGUAGES = ("bn", "fil", "id", "ja", "km", "lo", "ms", "my", "th", "vi", "zh")  # 22 directions with en
OFFICIAL_SIZES = {"train": 18088, "dev": 1000, "test": 1018}
SPLITS = ("train", "dev", "test")
FAIRSEQ_SUBSET = {"train": "train", "dev": "valid", "test": "test"}  # fairseq-preprocess names
NICT = "https://www2.nict.go.jp/astrec-att/member/mutiyama/ALT"
RELEASE_ZIP = "ALT-Parallel-Corpus-20191206.zip"


class AltError(Exception):
    """A user-facing error: main() prints it as one line and exits with status 2."""


def language(code):
    code = ALIASES.get(code, code)
    if code not in LANGUAGES:
        known = ", ".join(f"{c} ({LANGUAGES[c][1]})" for c in LANGUAGES)
        raise AltError(f"unknown language code {code!r}; ALT has: {known}")
    return code


def direction(text):
    """'en-vi' -> ('en', 'vi')."""
    parts = text.split("-")
    if len(parts) != 2 or not all(parts):
        raise AltError(f"a direction looks like en-vi or vi-en, got {text!r}")
    src, tgt = (language(p) for p in parts)
    if src == tgt:
        raise AltError(f"direction {text!r}: source and target are the same language")
    return src, tgt


def pair(src, tgt):
    """The data of en->vi and vi->en is one prepared pair, named with English (else the smaller
    code) first: ('vi', 'en') -> ('en', 'vi')."""
    a, b = sorted((src, tgt), key=lambda c: (c != "en", c))
    return a, b


def data_tag(subwords, vocab, train_subset=None):
    return f"{subwords}{vocab}" + (f".n{train_subset}" if train_subset else "")


def data_dir(work, src, tgt, tag):
    a, b = pair(src, tgt)
    return os.path.join(work, "data", f"{a}-{b}.{tag}")


def bleu_tokenize(lang):
    """sacrebleu tokenizer for references in `lang` (printed in every signature): zh -> zh,
    ja -> ja-mecab (char when MeCab is not installed), th/lo/km (no spaces between words) -> char,
    otherwise 13a."""
    if lang == "zh":
        return "zh"
    if lang == "ja":
        try:
            import MeCab  # noqa: F401
            return "ja-mecab"
        except ImportError:
            return "char"
    return "char" if lang in ("th", "lo", "km") else "13a"


def tool(name):
    """A console script next to this Python (the venv), else from PATH."""
    local = os.path.join(os.path.dirname(sys.executable), name)
    found = local if os.access(local, os.X_OK) else shutil.which(name)
    if not found:
        raise AltError(f"{name} is neither next to {sys.executable} nor on PATH (activate the venv "
                       "that has fairseq; see the README, Set-up)")
    return found


def tool_env(threads=None, extra=None):
    env = dict(os.environ)
    env["PYTHONPATH"] = REPO + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["PYTHONIOENCODING"] = "utf-8"
    env["PYTHONUNBUFFERED"] = "1"  # logs complete up to the moment a run is killed
    if threads:
        env["OMP_NUM_THREADS"] = env["MKL_NUM_THREADS"] = str(threads)
    env.update(extra or {})
    return env


def write_json(path, obj):
    """Atomic: the file is either absent or complete."""
    write_text(path, json.dumps(obj, indent=2, ensure_ascii=False) + "\n")


def write_text(path, text):
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)


def read_json(path, default=None):
    if not os.path.exists(path):
        return default
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def fresh_dir(path):
    """An empty directory for a step's temporary outputs (whatever an interrupted try left goes)."""
    if os.path.isdir(path):
        shutil.rmtree(path)
    elif os.path.exists(path):
        os.remove(path)
    os.makedirs(path)
    return path


def fmt(x):
    """1.0 -> '1', 0.05 -> '0.05' (run names, tables)."""
    return f"{x:g}"


def say(text):
    sys.stderr.write(text + "\n")  # one write: lines from the sweep's threads do not interleave
    sys.stderr.flush()


def run_main(main):
    """Console entry: AltError -> 'error: ...' and status 2."""
    try:
        return main()
    except AltError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
