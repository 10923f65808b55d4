"""Writes testdata/tokenizer_golden.txt: ids of SmolLM2's tokenizer, as Hugging Face tokenizers computes them.

The vocabulary and merges come from the GGUF model file (read with gguf-py); from them this script builds a
tokenizers Tokenizer the way SmolLM2's tokenizer.json defines it: a BPE model over the vocabulary and merges
(no unknown token, no dropout), the pre-tokenizer Sequence[Digits(individual_digits=True),
ByteLevel(add_prefix_space=False, use_regex=True)] and the ByteLevel decoder. No added (special) tokens are
registered, so <|im_start|> and the like in a text are split as plain text, as examples/llm/tokenizer.hpp does.

Usage, from the repository root (packages pinned in examples/llm/requirements-golden.txt):
    python examples/llm/gen_tokenizer_golden.py "$(scripts/fetch-llm-data.sh)"

Format (UTF-8 text, one record a line, fields separated by one space; texts as hex of their UTF-8 bytes, "-" for
the empty text):
    case <name> <text hex> <decoded hex> <n> <id_1> ... <id_n>
                                                     ids of encode(text) (no special tokens added), and the bytes
                                                     they decode to: the text less the bytes that have no token
                                                     (dropped by BPE), "=" when that is the text itself
    file <name> <sha256 of the file> <n> <sha256 of the ids>
                                                     the whole file's ids: their count and the sha256 of the ids
                                                     as consecutive little-endian int32
"""
import hashlib
import pathlib
import sys

from gguf import GGUFReader
from tokenizers import Tokenizer, decoders, models, pre_tokenizers

HERE = pathlib.Path(__file__).resolve().parent
PREFIX_CHARS = 3000  # the first characters of hamlet.txt, kept as a case with its ids

SAMPLES = [
    ("empty", ""),
    ("digits", "1234 12.5"),
    ("digits_mixed", "a1b22 x 3 4.0e-5 ٣٤ ²"),
    ("contractions", "don't I'll we've she's they're I'm he'd"),
    ("contractions_upper", "DON'T I'LL 'S"),
    ("spaces", "a  b\n\n  c\t\td"),
    ("trailing_spaces", "end   "),
    ("leading_spaces", "   start"),
    ("space_before_digit", "a  1  2"),
    ("newlines", "line one\nline two\r\n\nline three\n"),
    ("punctuation", "--!? ...; (x) [y] {z} \"q\" -- !!"),
    ("non_ascii", "café naïve Ωmega 日本語 😀"),
    ("tis", "'Tis now the very witching time of night,"),
    ("apostrophes", "o' th' 'tis ''quoted'' rock'n'roll"),
    ("whitespace_kinds", "a\u00a0b\u2003c\u3000d\u000be\u001cf\u0085g"),
    ("special_text", "<|im_start|>user\nHi<|im_end|>"),
    ("controls", "\u0000\u0001\u007f\u0080\u00ad"),
    ("long_word", "Honorificabilitudinitatibus" * 3),
    ("long_run", "=" * 100 + " " * 50 + "x"),
    ("dropped_bytes", "+\u0004+ =\u0006= a\u0013b \U00040000 \U000BFFFF!"),
]


def read_vocabulary(gguf_path):
    reader = GGUFReader(str(gguf_path))
    fields = reader.fields

    def value(key):
        return fields[key].contents()

    assert value("tokenizer.ggml.model") == "gpt2", value("tokenizer.ggml.model")
    assert value("tokenizer.ggml.pre") == "smollm", value("tokenizer.ggml.pre")
    return value("tokenizer.ggml.tokens"), value("tokenizer.ggml.merges")


def build_tokenizer(tokens, merges):
    vocab = {token: i for i, token in enumerate(tokens)}
    pairs = [tuple(merge.split(" ")) for merge in merges]
    tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=pairs))
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Digits(individual_digits=True),
         pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
    tokenizer.decoder = decoders.ByteLevel()
    return tokenizer


def ids_sha256(ids):
    return hashlib.sha256(b"".join(i.to_bytes(4, "little", signed=True) for i in ids)).hexdigest()


def byte_alphabet():
    """GPT-2's byte -> code point map: printable bytes stand for themselves, the others for 256, 257, ..."""
    printable = [b for b in range(256) if 0x21 <= b <= 0x7E or 0xA1 <= b <= 0xAC or 0xAE <= b <= 0xFF]
    others = [b for b in range(256) if b not in printable]
    return {**{b: chr(b) for b in printable}, **{b: chr(256 + n) for n, b in enumerate(others)}}


def case_line(tokenizer, tokens, name, text):
    ids = tokenizer.encode(text, add_special_tokens=False).ids
    alphabet, vocab = byte_alphabet(), set(tokens)
    raw = text.encode("utf-8")
    decoded = bytes(b for b in raw if alphabet[b] in vocab)  # BPE drops bytes without a token
    assert tokenizer.decode(ids) == decoded.decode("utf-8", errors="replace"), name
    return " ".join(["case", name, raw.hex() or "-", "=" if decoded == raw else decoded.hex() or "-", str(len(ids))]
                    + [str(i) for i in ids])


def main():
    data_dir = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "")
    tokens, merges = read_vocabulary(data_dir / "SmolLM2-135M-Instruct.Q4_1.gguf")
    tokenizer = build_tokenizer(tokens, merges)
    hamlet = (data_dir / "hamlet.txt").read_bytes()
    lines = ["# SmolLM2-135M-Instruct's tokenizer, by Hugging Face tokenizers; written by "
             "examples/llm/gen_tokenizer_golden.py"]
    for name, text in SAMPLES:
        lines.append(case_line(tokenizer, tokens, name, text))
    lines.append(case_line(tokenizer, tokens, "hamlet_prefix", hamlet.decode("utf-8")[:PREFIX_CHARS]))
    for name in ("hamlet.txt", "macbeth.txt"):
        content = (data_dir / name).read_bytes()
        ids = tokenizer.encode(content.decode("utf-8"), add_special_tokens=False).ids
        lines.append(" ".join(["file", name, hashlib.sha256(content).hexdigest(), str(len(ids)), ids_sha256(ids)]))
        print("%s: %d tokens" % (name, len(ids)))
    out = HERE / "testdata" / "tokenizer_golden.txt"
    out.parent.mkdir(exist_ok=True)
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("wrote %s (%d bytes)" % (out, out.stat().st_size))


if __name__ == "__main__":
    main()
