"""Writes golden files in the text format that tests/support/golden.hpp reads.

A file is a list of cases:

    case <name>
    <field> f32 <count> <hex float> ...     float32 values, exact (float.hex of the float32 value)
    <field> f64 <count> <hex float> ...     float64 values, exact
    <field> i64 <count> <integer> ...
    <field> str <one token without spaces>
    end

Lines starting with '#' are comments.
"""
import numpy as np


def _hex(v):
    """Shortest exact hex form: float.hex() without the mantissa's trailing zeros."""
    h = float(v).hex()
    if "p" not in h:  # inf, nan
        return h
    mantissa, exponent = h.split("p")
    if "." in mantissa:
        mantissa = mantissa.rstrip("0").rstrip(".")
    return f"{mantissa}p{exponent}"


def _line(key, value):
    if isinstance(value, str):
        assert " " not in value and value, value
        return f"{key} str {value}"
    arr = np.asarray(value)
    flat = arr.reshape(-1)
    if arr.dtype == np.float32:
        return f"{key} f32 {flat.size} " + " ".join(_hex(v) for v in flat)
    if arr.dtype == np.float64:
        return f"{key} f64 {flat.size} " + " ".join(_hex(v) for v in flat)
    if np.issubdtype(arr.dtype, np.integer) or arr.dtype == np.bool_:
        return f"{key} i64 {flat.size} " + " ".join(str(int(v)) for v in flat)
    raise TypeError(f"{key}: unsupported dtype {arr.dtype}")


def write_cases(path, cases, header=""):
    """cases: iterable of (name, {field: numpy array | str})."""
    with open(path, "w") as f:
        for line in header.splitlines():
            f.write(f"# {line}\n")
        for name, fields in cases:
            assert " " not in name, name
            f.write(f"case {name}\n")
            for key, value in fields.items():
                f.write(_line(key, value) + "\n")
            f.write("end\n")
