#!/usr/bin/env python3
"""Writes tests/io/corpus/: small hostile safetensors and GGUF files, one defect each, that shrink must reject with a
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


def gguf_string(text):
    data = text.encode("utf-8") if isinstance(text, str) else text
    return struct.pack("<Q", len(data)) + data


def gguf_file(kvs=b"", kv_count=0, infos=b"", tensor_count=0, data=b"", version=3, magic=b"GGUF", pad=True):
    """A GGUF file: header, the encoded key/values and tensor infos, padding to 32 bytes (when `pad`), the data."""
    head = magic + struct.pack("<IQQ", version, tensor_count, kv_count) + kvs + infos
    if pad and tensor_count:
        head += b"\0" * (-len(head) % 32)
    return head + data


def gguf_kv(key, value_type, value):
    return gguf_string(key) + struct.pack("<I", value_type) + value


def gguf_info(name, ne, ggml_type, offset):
    return gguf_string(name) + struct.pack("<I", len(ne)) + struct.pack(f"<{len(ne)}Q", *ne) + \
        struct.pack("<IQ", ggml_type, offset)


def gguf_cases():
    four = b"\x00\x00\x80\x3f"  # 1.0f
    one = gguf_info("w", [1], 0, 0)  # one F32 element
    u32 = lambda v: struct.pack("<I", v)  # noqa: E731
    nested = b"".join(struct.pack("<IQ", 9, 1) for _ in range(12)) + struct.pack("<IQ", 0, 0)
    return {
        "empty_file": b"",
        "bad_magic": b"GGML" + struct.pack("<IQQ", 3, 0, 0),
        "big_endian": gguf_file(version=0x03000000),
        "version_1": gguf_file(version=1),
        "kv_count_huge": gguf_file(kv_count=2**63),
        "tensor_count_huge": gguf_file(tensor_count=2**63),
        "key_length_past_file": gguf_file(kvs=struct.pack("<Q", 2**40) + b"key" + b"\0" * 16, kv_count=1),
        "unknown_value_type": gguf_file(kvs=gguf_kv("k", 13, b"\0"), kv_count=1),
        "array_count_huge": gguf_file(kvs=gguf_kv("k", 9, struct.pack("<IQ", 8, 2**61)), kv_count=1),
        "bool_not_0_or_1": gguf_file(kvs=gguf_kv("k", 7, b"\x05"), kv_count=1),
        "arrays_nested_too_deep": gguf_file(kvs=gguf_kv("k", 9, nested), kv_count=1),
        "duplicate_key": gguf_file(kvs=gguf_kv("k", 4, u32(1)) + gguf_kv("k", 4, u32(2)), kv_count=2),
        "duplicate_tensor": gguf_file(infos=one + gguf_info("w", [1], 0, 32), tensor_count=2,
                                      data=four + b"\0" * 28 + four),
        "too_many_dims": gguf_file(infos=gguf_info("w", [1, 1, 1, 1, 1], 0, 0), tensor_count=1, data=four),
        "dims_overflow": gguf_file(infos=gguf_info("w", [2**32, 2**32], 0, 0), tensor_count=1, data=four),
        "unknown_tensor_type": gguf_file(infos=gguf_info("w", [1], 99, 0), tensor_count=1, data=four),
        "row_not_whole_blocks": gguf_file(infos=gguf_info("w", [16], 8, 0), tensor_count=1, data=b"\0" * 34),
        "offset_unaligned": gguf_file(infos=gguf_info("w", [1], 0, 8), tensor_count=1, data=four * 4),
        "offset_past_file": gguf_file(infos=gguf_info("w", [1], 0, 2**40), tensor_count=1, data=four),
        "truncated_tensor_data": gguf_file(infos=gguf_info("w", [4], 0, 0), tensor_count=1, data=four * 2),
        "overlapping_tensors": gguf_file(infos=gguf_info("a", [16], 0, 0) + gguf_info("b", [4], 0, 32),
                                         tensor_count=2, data=four * 16),
        "alignment_not_power_of_two": gguf_file(kvs=gguf_kv("general.alignment", 4, u32(24)), kv_count=1,
                                                infos=one, tensor_count=1, data=four),
    }


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
        if name.endswith(".safetensors") or name.endswith(".gguf"):
            os.remove(os.path.join(CORPUS, name))
    files = [(name + ".safetensors", content) for name, content in cases.items()]
    files += [(name + ".gguf", content) for name, content in gguf_cases().items()]
    for name, content in sorted(files):
        with open(os.path.join(CORPUS, name), "wb") as out:
            out.write(content)
    print(f"make_corpus: wrote {len(files)} files to {CORPUS}")


if __name__ == "__main__":
    main()
