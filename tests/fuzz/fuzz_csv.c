/* fuzz_csv.c -- ct_df_read_csv_buffer on arbitrary bytes; a parsed frame
 * is then sorted, grouped, exported to Arrow and imported back.  The
 * first byte picks options (delimiter, header, threads). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <ctorch/ctorch.h>
#include <ctorch/data.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    ct_csv_opts o = {0};
    if (size > 0) {
        uint8_t b = data[0];
        o.delimiter = (b & 3) == 1 ? ';' : (b & 3) == 2 ? '\t' : ',';
        o.no_header = (b & 4) != 0;
        o.num_threads = (b & 8) ? 2 : 1;
        data++;
        size--;
    }
    ct_df *df = ct_df_read_csv_buffer((const char *)data, size, &o);
    if (!df) return 0;
    if (ct_df_num_columns(df) > 0) {
        const char *name = ct_df_column_name(df, 0);
        ct_df *s = ct_df_sort_by(df, &name, NULL, 1);
        ct_df_free(s);
        ct_df_agg agg = {name, CT_DF_COUNT, "n"};
        ct_df *g = ct_df_group_by(df, &name, 1, &agg, 1);
        ct_df_free(g);
        ct_column *c = ct_df_column_at(df, 0);
        if (ct_column_type(c) == CT_DF_STRING) ct_column_release(ct_column_tokenize(c, NULL, 0, 0));
    }
    struct ArrowSchema sc;
    struct ArrowArray ar;
    if (ct_df_export_arrow(df, &sc, &ar) == CT_OK) {
        ct_df *back = ct_df_import_arrow(&ar, &sc);
        ct_df_free(back);
        if (ar.release) ar.release(&ar);
        sc.release(&sc);
    }
    ct_df_free(df);
    ct_clear_error();
    return 0;
}
