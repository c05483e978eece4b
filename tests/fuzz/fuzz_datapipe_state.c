/* fuzz_datapipe_state.c -- ct_datapipe_state_restore on hostile blobs.
 * The graph covers every stage that keeps a position (sources, shuffle
 * buffer with tensors and samples, flat_map/unbatch lists, mux rounds,
 * concat, cycle, header, shard, bucket_batch, line_reader/csv_parser over
 * (path, contents) tuples); after a successful restore it is drained
 * (bounded).  Seeds: real blobs saved at several positions. */
#include <stdint.h>
#include <stdlib.h>

#include <ctorch/ctorch.h>

static ct_pipe_item *to_sample(ct_pipe_item *x, void *u) {
    (void)u;
    ct_sample *s = ct_sample_new();
    ct_scope sc = ct_scope_begin();
    ct_status st = ct_sample_set(s, "x", ct_full(CT_SHAPE(2), (double)ct_pipe_item_as_int(x), CT_F32));
    ct_scope_end(sc);
    if (st) {
        ct_sample_free(s);
        return NULL;
    }
    return ct_pipe_item_sample(s);
}
static ct_pipe_item *pair(ct_pipe_item *x, void *u) {
    (void)u;
    ct_pipe_item *xs[2] = {ct_pipe_item_retain(x), ct_pipe_item_tuple2(ct_pipe_item_int(1), ct_pipe_item_retain(x))};
    return ct_pipe_item_list(xs, 2);
}
static int64_t key(ct_pipe_item *x, void *u) {
    (void)u;
    return ct_pipe_item_get_kind(x) == CT_PIPE_ITEM_INT ? -ct_pipe_item_as_int(x) : 0;
}

ct_datapipe *fuzz_datapipe_graph(void);
ct_datapipe *fuzz_datapipe_graph(void) {
    ct_pipe_item *files[2] = {
        ct_pipe_item_tuple2(ct_pipe_item_str("a.csv"), ct_pipe_item_str("h,k\n1,\"x,y\"\n2,\"q\"\"\"\n")),
        ct_pipe_item_tuple2(ct_pipe_item_str("b.txt"), ct_pipe_item_str("l1\nl2\r\nl3"))};
    ct_datapipe *csv = ct_datapipe_csv_parser(ct_datapipe_from_items(files, 1), ',', 1, true);
    ct_datapipe *lines = ct_datapipe_line_reader(ct_datapipe_from_items(files + 1, 1));
    ct_pipe_item_release(files[0]);
    ct_pipe_item_release(files[1]);
    ct_datapipe *sh = ct_datapipe_shuffle(ct_datapipe_map(ct_datapipe_from_range(0, 9), to_sample, NULL), 4, 7);
    ct_datapipe *fm = ct_datapipe_flat_map(ct_datapipe_shard(ct_datapipe_from_range(0, 12), 2, 1), pair, NULL);
    ct_datapipe *bb = ct_datapipe_bucket_batch(ct_datapipe_from_range(0, 10), 2, false, 2, 2, key, NULL, 3);
    ct_datapipe *m[3] = {sh, fm, ct_datapipe_cycle(ct_datapipe_unbatch(bb), 2)};
    ct_datapipe *c[3] = {ct_datapipe_mux(m, 3), csv, lines};
    return ct_datapipe_header(ct_datapipe_concat(c, 3), 200);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static ct_datapipe *p;
    if (!p) p = fuzz_datapipe_graph();
    if (ct_datapipe_state_restore(p, data, size) == CT_OK) {
        ct_pipe_item *x;
        for (int k = 0; k < 300 && ct_datapipe_next(p, &x) == 1; k++) ct_pipe_item_release(x);
    }
    ct_clear_error();
    return 0;
}
