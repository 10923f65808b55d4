#!/usr/bin/env python3
"""Writes tests/io/corpus/: small hostile safetensors files, one defect each, that shrink must reject with a
clear shrink::Error. Standard library only; run it again after changing it and commit the files it writes.
tests/io/test_corpus.cpp holds, for each file, a fragment its error message must contain."""
import json
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "corpus")


def file_bytes(header, data=b"", length=None):
    """8-byte little-endian header length (the real one unless `length` is given), the header, the data."""
    if not isinstance(header, bytes):
        header = json.dumps(header, separators=(",", ":")).encode("utf-8")
    return struct.pack("<Q", len(header) if length is None else length) + header + data


def tensor(dtype, shape, begin, end):
    return {"dtype": dtype, "shape": shape, "data_offsets": [begin, end]}


def main():
    four = b"\x00\x00\x80\x3f"  # 1.0f
    cases = {
        "empty_file": b"",
        "truncated_header_length": b"\x10\x00\x00\x00\x00",
        "header_length_past_file": file_bytes(b"{}", length=1000),
        "header_length_over_cap": file_bytes(b"{}", length=200_000_000),
        "not_json": file_bytes(b"this is not json"),
        "json_array": file_bytes(b"[1, 2, 3]"),
        "bad_utf8": file_bytes(b'{"w\xff":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}', four),
        # Written by hand: a dict cannot hold the same key twice.
        "duplicate_name": file_bytes(
            b'{"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},'
            b'"w":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}', four + four),
        "unknown_dtype": file_bytes({"w": tensor("F7", [1], 0, 4)}, four),
        "negative_shape": file_bytes({"w": tensor("F32", [-1], 0, 4)}, four),
        "non_integer_shape": file_bytes({"w": tensor("F32", [2.5], 0, 4)}, four),
        # 2^32 * 2^32 elements: the product overflows int64 (and uint64).
        "shape_overflow": file_bytes({"w": tensor("F32", [2**32, 2**32], 0, 4)}, four),
        "offsets_out_of_range": file_bytes({"w": tensor("F32", [2], 0, 8)}, four),
        "begin_after_end": file_bytes({"w": tensor("F32", [1], 4, 0)}, four),
        "overlapping_tensors": file_bytes({"a": tensor("F32", [2], 0, 8), "b": tensor("F32", [1], 4, 8)}, four * 2),
        "gap_between_tensors": file_bytes({"a": tensor("F32", [1], 0, 4), "b": tensor("F32", [1], 8, 12)}, four * 3),
        "bytes_not_matching_shape": file_bytes({"w": tensor("F32", [3], 0, 8)}, four * 2),
        "metadata_value_not_string": file_bytes({"__metadata__": {"k": 1}, "w": tensor("F32", [1], 0, 4)}, four),
        "trailing_bytes": file_bytes({"w": tensor("F32", [1], 0, 4)}, four * 2),
        "truncated_data": file_bytes({"w": tensor("F32", [4], 0, 16)}, four * 2),
        "entry_not_object": file_bytes({"w": 5}),
        "deep_nesting": file_bytes(b'{"w":{"dtype":"F32","shape":[[[1]]],"data_offsets":[0,4]}}', four),
    }
    os.makedirs(CORPUS, exist_ok=True)
    for name in os.listdir(CORPUS):
        if name.endswith(".safetensors"):
            os.remove(os.path.join(CORPUS, name))
    for name, content in sorted(cases.items()):
        with open(os.path.join(CORPUS, name + ".safetensors"), "wb") as out:
            out.write(content)
    print(f"make_corpus: wrote {len(cases)} files to {CORPUS}")


if __name__ == "__main__":
    main()
