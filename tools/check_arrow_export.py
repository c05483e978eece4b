"""Checks ctorch's Arrow C Data Interface against pyarrow itself (not part
of `make test`; needs pyarrow: `pip install pyarrow` into python3).

    python3 tools/check_arrow_export.py build/libctorch.so

1. ct_df_read_csv(tests/fixtures/dataframe/df.csv) exported with
   ct_df_export_arrow is imported by pyarrow (StructArray._import_from_c)
   and compared with pyarrow.csv.read_csv of the same file;
2. a pyarrow RecordBatch exported with _export_to_c is imported by
   ct_df_import_arrow and read back value by value;
3. the release callbacks run (pyarrow releases what it imported).
"""
import ctypes as C
import math
import os
import sys

import pyarrow as pa
import pyarrow.csv as pacsv


class ArrowSchema(C.Structure):
    pass


ArrowSchema._fields_ = [("format", C.c_char_p), ("name", C.c_char_p), ("metadata", C.c_char_p),
                        ("flags", C.c_int64), ("n_children", C.c_int64),
                        ("children", C.POINTER(C.POINTER(ArrowSchema))),
                        ("dictionary", C.POINTER(ArrowSchema)), ("release", C.c_void_p),
                        ("private_data", C.c_void_p)]


class ArrowArray(C.Structure):
    pass


ArrowArray._fields_ = [("length", C.c_int64), ("null_count", C.c_int64), ("offset", C.c_int64),
                       ("n_buffers", C.c_int64), ("n_children", C.c_int64),
                       ("buffers", C.POINTER(C.c_void_p)), ("children", C.POINTER(C.POINTER(ArrowArray))),
                       ("dictionary", C.POINTER(ArrowArray)), ("release", C.c_void_p),
                       ("private_data", C.c_void_p)]


def main():
    lib = C.CDLL(sys.argv[1] if len(sys.argv) > 1 else "build/libctorch.so")
    lib.ct_df_read_csv.restype = C.c_void_p
    lib.ct_df_read_csv.argtypes = [C.c_char_p, C.c_void_p]
    lib.ct_df_export_arrow.argtypes = [C.c_void_p, C.POINTER(ArrowSchema), C.POINTER(ArrowArray)]
    lib.ct_df_import_arrow.restype = C.c_void_p
    lib.ct_df_import_arrow.argtypes = [C.POINTER(ArrowArray), C.POINTER(ArrowSchema)]
    lib.ct_df_free.argtypes = [C.c_void_p]
    lib.ct_df_column.restype = C.c_void_p
    lib.ct_df_column.argtypes = [C.c_void_p, C.c_char_p]
    lib.ct_df_num_rows.restype = C.c_int64
    lib.ct_df_num_rows.argtypes = [C.c_void_p]
    lib.ct_column_get_double.restype = C.c_double
    lib.ct_column_get_double.argtypes = [C.c_void_p, C.c_int64]
    lib.ct_column_is_null.restype = C.c_bool
    lib.ct_column_is_null.argtypes = [C.c_void_p, C.c_int64]
    lib.ct_last_error.restype = C.c_char_p

    here = os.path.dirname(os.path.abspath(__file__))
    path = os.path.join(here, "..", "tests", "fixtures", "dataframe", "df.csv")
    df = lib.ct_df_read_csv(path.encode(), None)
    assert df, lib.ct_last_error()
    s, a = ArrowSchema(), ArrowArray()
    assert lib.ct_df_export_arrow(df, C.byref(s), C.byref(a)) == 0
    lib.ct_df_free(df)  # the export keeps the buffers alive
    arr = pa.Array._import_from_c(C.addressof(a), C.addressof(s))
    ours = pa.RecordBatch.from_struct_array(arr)
    # pandas convention (ours): an empty field is null in string columns too
    ref = pacsv.read_csv(path, convert_options=pacsv.ConvertOptions(strings_can_be_null=True))
    ok = True
    for name in ref.column_names:
        got, exp = ours.column(name).to_pylist(), ref.column(name).to_pylist()
        same = len(got) == len(exp) and all(
            (g is None and e is None) or (g == e) or (isinstance(g, float) and isinstance(e, float) and math.isclose(g, e))
            for g, e in zip(got, exp))
        print("%-6s %-8s %s" % (name, ours.schema.field(name).type, "ok" if same else "DIFFERS %r vs %r" % (got, exp)))
        ok &= same
    del arr, ours  # releases our export

    batch = pa.RecordBatch.from_pydict({"i": pa.array([1, None, 3], pa.int64()),
                                        "f": pa.array([0.5, 2.5, None]),
                                        "s": pa.array(["x", "yy", None])})
    sa = pa.StructArray.from_arrays(batch.columns, names=batch.schema.names)
    s2, a2 = ArrowSchema(), ArrowArray()
    sa._export_to_c(C.addressof(a2), C.addressof(s2))
    df2 = lib.ct_df_import_arrow(C.byref(a2), C.byref(s2))
    assert df2, lib.ct_last_error()
    col = lib.ct_df_column(df2, b"f")
    vals = [None if lib.ct_column_is_null(col, k) else lib.ct_column_get_double(col, k) for k in range(3)]
    print("import from pyarrow: rows", lib.ct_df_num_rows(df2), "f =", vals)
    ok &= vals == [0.5, 2.5, None] and lib.ct_df_num_rows(df2) == 3
    lib.ct_df_free(df2)  # runs pyarrow's release
    C.CFUNCTYPE(None, C.POINTER(ArrowSchema))(s2.release)(C.byref(s2))
    print("arrow check:", "PASS" if ok else "FAIL")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
