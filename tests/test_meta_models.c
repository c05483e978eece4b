/* test_meta_models.c -- models built on the meta device (torch's
 * `with torch.device("meta"): resnet50()`): ResNet-50 and BERT-base cost no
 * parameter memory there (resident memory grows by less than 5 MB), have
 * the parameter counts of torchvision's resnet50() (25,557,032) and
 * transformers' BertModel(BertConfig()) (109,482,240, with the pooler), and
 * after ct_module_to(m, CT_CPU) and loading the state dict of a model built
 * on the cpu, their forward pass equals that model's bit for bit.  Also the
 * basics: meta tensors' geometry, printing, refusals of value reads, the
 * per-thread default device and ct_to_device, and whole devices {type,
 * index} (ct_dev: parsed and printed like torch.device, ct_to_dev, the
 * *_dev factories, ct_module_to_dev). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <ctorch/ctorch.h>

#include "test_util.h"

#if defined(__SANITIZE_ADDRESS__)
#define CT_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CT_TEST_ASAN 1
#endif
#endif


static long rss_bytes(void) {
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f) return -1;
    long size = 0, res = 0;
    int k = fscanf(f, "%ld %ld", &size, &res);
    fclose(f);
    return k == 2 ? res * sysconf(_SC_PAGESIZE) : -1;
}

static void meta_basics(void **state) {
    (void)state;
    SCOPE_BEGIN;
    ct_tensor *m = ct_empty_on(CT_SHAPE(2, 3), CT_F32, CT_META);
    assert_non_null(m);
    assert_int_equal(ct_get_device(m), CT_META);
    assert_int_equal(ct_get_device_index(m), 0);
    assert_int_equal(ct_stride(m, 0), 3);
    char *s = ct_to_string(m);
    assert_string_equal(s, "tensor(..., device='meta', size=(2, 3))");
    free(s);
    ct_tensor *v = ct_empty_on(CT_SHAPE(4), CT_F64, CT_META);
    s = ct_to_string(v);
    assert_string_equal(s, "tensor(..., device='meta', size=(4,), dtype=torch.float64)");
    free(s);
    /* values cannot be read */
    ct_clear_error();
    assert_null(ct_data_ptr(m));
    assert_int_equal(ct_last_error_code(), CT_ERR_DEVICE);
    assert_string_equal(ct_last_error(),
                        "data_ptr: cannot read the values of a meta tensor (meta tensors have no data)");
    ct_clear_error();
    (void)ct_item(ct_empty_on(CT_SHAPE(1), CT_F32, CT_META));
    assert_int_equal(ct_last_error_code(), CT_ERR_DEVICE);
    /* ops compute geometry only: broadcasting, promotion, a transpose's strides */
    ct_tensor *b = ct_empty_on(CT_SHAPE(3), CT_F64, CT_META);
    ct_tensor *r = ct_add(m, b);
    assert_non_null(r);
    assert_int_equal(ct_get_device(r), CT_META);
    assert_int_equal(ct_get_dtype(r), CT_F64);
    assert_int_equal(ct_size(r, 0), 2);
    assert_int_equal(ct_size(r, 1), 3);
    ct_tensor *t = ct_transpose(m, 0, 1);
    assert_int_equal(ct_stride(t, 0), 1);
    assert_int_equal(ct_stride(t, 1), 3);
    ct_tensor *mm = ct_matmul(m, ct_empty_on(CT_SHAPE(3, 5), CT_F32, CT_META));
    assert_int_equal(ct_size(mm, 1), 5);
    /* a wrapped number (0-dim cpu) combines with a meta tensor */
    ct_tensor *w = ct_mul(m, ct_wrap(2.0));
    assert_non_null(w);
    assert_int_equal(ct_get_device(w), CT_META);
    assert_int_equal(ct_get_dtype(w), CT_F32);
    /* the same error as on the cpu for bad shapes */
    ct_clear_error();
    assert_null(ct_add(m, ct_empty_on(CT_SHAPE(4), CT_F32, CT_META)));
    char meta_msg[512];
    snprintf(meta_msg, sizeof meta_msg, "%s", ct_last_error());
    ct_clear_error();
    assert_null(ct_add(ct_empty(CT_SHAPE(2, 3), CT_F32), ct_empty(CT_SHAPE(4), CT_F32)));
    assert_string_equal(meta_msg, ct_last_error());
    /* a cpu tensor with dims does not combine with a meta one */
    ct_clear_error();
    assert_null(ct_add(m, ct_ones(CT_SHAPE(3), CT_F32)));
    assert_int_equal(ct_last_error_code(), CT_ERR_DEVICE);
    ct_clear_error();
    SCOPE_END;
}

static void default_device_and_to(void **state) {
    (void)state;
    SCOPE_BEGIN;
    assert_int_equal(ct_get_default_device(), CT_CPU);
    assert_int_equal(ct_set_default_device(CT_META), CT_OK);
    ct_tensor *z = ct_zeros(CT_SHAPE(5, 6), CT_F32);
    ct_tensor *r = ct_randn(CT_SHAPE(7), CT_F32);
    ct_tensor *a = ct_arange(0, 10, 1, CT_I64);
    assert_int_equal(ct_get_device(z), CT_META);
    assert_int_equal(ct_get_device(r), CT_META);
    assert_int_equal(ct_get_device(a), CT_META);
    assert_int_equal(ct_size(a, 0), 10);
    assert_int_equal(ct_get_device(ct_wrap(1.0)), CT_CPU); /* wrapped numbers stay on the cpu */
    assert_int_equal(ct_set_default_device(CT_CPU), CT_OK);
    assert_int_equal(ct_get_device(ct_zeros(CT_SHAPE(2), CT_F32)), CT_CPU);
    /* an unavailable device is refused */
    ct_clear_error();
    if (!ct_device_is_available(CT_CUDA)) {
        assert_int_not_equal(ct_set_default_device(CT_CUDA), CT_OK);
        assert_int_equal(ct_last_error_code(), CT_ERR_DEVICE);
        assert_int_equal(ct_get_default_device(), CT_CPU);
    }
    ct_clear_error();
    /* cpu -> meta -> cpu keeps the geometry; meta -> cpu is uninitialized */
    ct_tensor *c = ct_arange(0, 6, 1, CT_F32);
    ct_tensor *m = ct_to_device(c, CT_META);
    assert_int_equal(ct_get_device(m), CT_META);
    assert_int_equal(ct_numel(m), 6);
    ct_tensor *back = ct_to_device(m, CT_CPU);
    assert_int_equal(ct_get_device(back), CT_CPU);
    assert_int_equal(ct_numel(back), 6);
    assert_non_null(ct_data_ptr(back));
    assert_true(ct_to_device(c, CT_CPU) == c);
    SCOPE_END;
}

/* Readers of host data (a checkpoint) make cpu tensors whatever the
 * default device: loading weights while building on meta works. */
/* torch.device: {type, index}, parsed and printed like torch's strings */
static void whole_devices(void **state) {
    (void)state;
    struct { const char *s; ct_device type; int index; const char *str; } ok[] = {
        {"cpu", CT_CPU, 0, "cpu"}, {"meta", CT_META, 0, "meta"}, {"cuda", CT_CUDA, 0, "cuda:0"},
        {"cuda:1", CT_CUDA, 1, "cuda:1"}, {"cpu:0", CT_CPU, 0, "cpu"}, {"cuda:10", CT_CUDA, 10, "cuda:10"},
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        ct_dev d = CT_DEV(CT_META, 7);
        assert_int_equal(ct_dev_parse(ok[i].s, &d), CT_OK);
        assert_int_equal(d.type, ok[i].type);
        assert_int_equal(d.index, ok[i].index);
        char buf[32];
        assert_string_equal(ct_dev_str(d, buf, sizeof buf), ok[i].str);
    }
    const char *bad[] = {"gpu", "", "cpu:", "cuda:x", "cuda:1x", "cuda:-1", "cuda:01", "CPU", "cuda:1:2"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ct_dev d = CT_DEV(CT_META, 7);
        assert_int_equal(ct_dev_parse(bad[i], &d), CT_ERR_ARG);
        assert_int_equal(d.type, CT_META); /* untouched */
        assert_non_null(strstr(ct_last_error(), "device"));
        ct_clear_error();
    }
    assert_int_equal(ct_dev_parse("gpu", &(ct_dev){0}), CT_ERR_ARG);
    assert_string_equal(ct_last_error(), "device: expected one of cpu, cuda, meta, opencl device type at start of "
                        "device string: gpu");
    ct_clear_error();
    assert_true(ct_dev_equal(CT_DEV(CT_CPU, 0), CT_DEV(CT_CPU, 0)));
    assert_false(ct_dev_equal(CT_DEV(CT_CPU, 0), CT_DEV(CT_META, 0)));
    assert_true(ct_dev_is_available(CT_DEV(CT_CPU, 0)));
    assert_true(ct_dev_is_available(CT_DEV(CT_META, 0)));
    assert_false(ct_dev_is_available(CT_DEV(CT_CPU, 1)));
    assert_false(ct_dev_is_available(CT_DEV(CT_META, -1)));

    SCOPE_BEGIN;
    ct_tensor *m = ct_zeros_dev(CT_SHAPE(2, 3), CT_F32, CT_DEV(CT_META, 0));
    assert_non_null(m);
    assert_true(ct_dev_equal(ct_tensor_dev(m), CT_DEV(CT_META, 0)));
    ct_tensor *c = ct_to_dev(m, CT_DEV(CT_CPU, 0));
    assert_non_null(c);
    assert_true(ct_dev_equal(ct_tensor_dev(c), CT_DEV(CT_CPU, 0)));
    assert_ptr_equal(ct_to_dev(c, CT_DEV(CT_CPU, 0)), c); /* already there: itself */
    ct_tensor *f = ct_full_dev(CT_SHAPE(2), 3.5, CT_F64, CT_DEV(CT_CPU, 0));
    assert_non_null(f);
    assert_true(ct_item(ct_sum(f, NULL, 0, false)) == 7.0);
    /* devices that do not exist: an error naming them, never a crash */
    assert_null(ct_zeros_dev(CT_SHAPE(2), CT_F32, CT_DEV(CT_CPU, 1)));
    assert_int_equal(ct_last_error_code(), CT_ERR_DEVICE);
    assert_non_null(strstr(ct_last_error(), "cpu:1"));
    ct_clear_error();
    assert_null(ct_to_dev(c, CT_DEV(CT_META, 2)));
    assert_int_equal(ct_last_error_code(), CT_ERR_DEVICE);
    ct_clear_error();
    if (!ct_device_is_available(CT_CUDA)) {
        assert_null(ct_ones_dev(CT_SHAPE(2), CT_F32, CT_DEV(CT_CUDA, 0)));
        assert_int_equal(ct_last_error_code(), CT_ERR_DEVICE);
        ct_clear_error();
        assert_int_equal(ct_dev_synchronize(CT_DEV(CT_CUDA, 0)), CT_ERR_DEVICE);
        ct_clear_error();
    }
    assert_int_equal(ct_dev_synchronize(CT_DEV(CT_CPU, 0)), CT_OK);
    /* the default device as a whole device */
    assert_int_equal(ct_set_default_dev(CT_DEV(CT_META, 0)), CT_OK);
    assert_true(ct_dev_equal(ct_get_default_dev(), CT_DEV(CT_META, 0)));
    assert_int_equal(ct_get_device(ct_zeros(CT_SHAPE(1), CT_F32)), CT_META);
    assert_int_equal(ct_set_default_dev(CT_DEV(CT_META, 1)), CT_ERR_DEVICE);
    ct_clear_error();
    assert_true(ct_dev_equal(ct_get_default_dev(), CT_DEV(CT_META, 0))); /* unchanged */
    assert_int_equal(ct_set_default_dev(CT_DEV(CT_CPU, 0)), CT_OK);
    /* a module moved by whole device */
    ct_module *lin = ct_linear_new(3, 2, true);
    assert_non_null(lin);
    assert_int_equal(ct_module_to_dev(lin, CT_DEV(CT_META, 0)), CT_OK);
    assert_int_equal(ct_get_device(ct_module_param(lin, 0)), CT_META);
    assert_int_equal(ct_module_to_dev(lin, CT_DEV(CT_CPU, 3)), CT_ERR_DEVICE);
    ct_clear_error();
    assert_int_equal(ct_get_device(ct_module_param(lin, 0)), CT_META); /* unchanged */
    assert_int_equal(ct_module_to_dev(lin, CT_DEV(CT_CPU, 0)), CT_OK);
    assert_int_equal(ct_get_device(ct_module_param(lin, 0)), CT_CPU);
    ct_module_release(lin);
    SCOPE_END;
}

static void loaders_ignore_default_device(void **state) {
    (void)state;
    SCOPE_BEGIN;
    ct_sample *sd = ct_sample_new();
    assert_non_null(sd);
    ct_tensor *w = ct_arange(0, 6, 1, CT_F32);
    assert_int_equal(ct_sample_set(sd, "w", w), CT_OK);
    ct_tensor *m = ct_gt(w, ct_wrap(2.5));
    assert_int_equal(ct_sample_set(sd, "m", m), CT_OK);
    void *img = NULL;
    size_t n = 0;
    assert_int_equal(ct_safetensors_serialize(sd, NULL, &img, &n), CT_OK);
    ct_sample_free(sd);
    assert_int_equal(ct_set_default_device(CT_META), CT_OK);
    ct_safetensors *f = ct_safetensors_open_buffer(img, n, "mem");
    assert_non_null(f);
    ct_tensor *r = ct_safetensors_get(f, "w"), *rm = ct_safetensors_get(f, "m");
    assert_int_equal(ct_set_default_device(CT_CPU), CT_OK);
    assert_non_null(r);
    assert_non_null(rm);
    assert_int_equal(ct_get_device(r), CT_CPU);
    assert_int_equal(ct_get_device(rm), CT_CPU);
    assert_int_equal(ct_equal(r, w), 1);
    assert_int_equal(ct_equal(rm, m), 1);
    ct_safetensors_close(f);
    free(img);
    SCOPE_END;
}

/* the default device is per thread */
static void *other_thread(void *arg) {
    int *dev = arg;
    *dev = (int)ct_get_default_device();
    ct_tensor *t = ct_zeros(CT_SHAPE(2), CT_F32);
    dev[1] = t ? (int)ct_get_device(t) : -1;
    ct_release(t);
    return NULL;
}

static void default_device_per_thread(void **state) {
    (void)state;
    assert_int_equal(ct_set_default_device(CT_META), CT_OK);
    int seen[2] = {-1, -1};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, other_thread, seen), 0);
    pthread_join(th, NULL);
    assert_int_equal(ct_set_default_device(CT_CPU), CT_OK);
    assert_int_equal(seen[0], CT_CPU);
    assert_int_equal(seen[1], CT_CPU);
}

typedef ct_module *(*build_fn)(void);
static ct_module *build_resnet50(void) { return ct_resnet50_new(1000); }
static ct_module *build_bert_base(void) {
    ct_bert_config cfg = ct_bert_base_config();
    return ct_bert_model_new(&cfg, true);
}

/* Builds on meta; checks memory and the count; moves to the cpu, loads the
 * state dict of a cpu-built model; returns both. */
static void build_on_meta(const char *name, build_fn build, int64_t want_params, ct_module **meta_out,
                          ct_module **cpu_out) {
    ct_empty_cache(); /* blocks cached by earlier tests would hide an allocation */
    long rss0 = rss_bytes();
    assert_int_equal(ct_set_default_device(CT_META), CT_OK);
    ct_module *m = build();
    assert_int_equal(ct_set_default_device(CT_CPU), CT_OK);
    long rss1 = rss_bytes();
    assert_non_null(m);
    int64_t n = ct_module_num_parameters(m, false);
    int np = ct_module_named_parameters(m, NULL, NULL, 0);
    assert_true(np > 0);
    ct_tensor **ps = malloc(sizeof(ct_tensor *) * (size_t)np);
    assert_non_null(ps);
    assert_int_equal(ct_module_named_parameters(m, NULL, ps, np), np);
    for (int i = 0; i < np; i++) assert_int_equal(ct_get_device(ps[i]), CT_META);
    int nb = ct_module_named_buffers(m, NULL, NULL, 0);
    ct_tensor **bs = malloc(sizeof(ct_tensor *) * (size_t)(nb ? nb : 1));
    assert_non_null(bs);
    assert_int_equal(ct_module_named_buffers(m, NULL, bs, nb), nb);
    for (int i = 0; i < nb; i++) assert_int_equal(ct_get_device(bs[i]), CT_META);
    double grow_mb = (double)(rss1 - rss0) / (1024.0 * 1024.0);
    printf("%s on meta: %lld parameters (torch: %lld), resident memory +%.2f MB\n", name,
           (long long)n, (long long)want_params, grow_mb);
    assert_int_equal(n, want_params);
#ifndef CT_TEST_ASAN
    assert_true(rss0 > 0 && grow_mb < 5.0);
#endif
    ct_manual_seed(7);
    ct_module *c = build();
    assert_non_null(c);
    assert_int_equal(ct_module_num_parameters(c, false), want_params);
    ct_status mst = ct_module_to(m, CT_CPU);
    if (mst) printf("module_to: %s\n", ct_last_error());
    assert_int_equal(mst, CT_OK);
    for (int i = 0; i < np; i++) assert_int_equal(ct_get_device(ps[i]), CT_CPU); /* the same handles, moved */
    for (int i = 0; i < nb; i++) assert_int_equal(ct_get_device(bs[i]), CT_CPU);
    free(ps);
    free(bs);
    ct_sample *sd = ct_module_state_dict(c);
    assert_non_null(sd);
    assert_int_equal(ct_module_load_state_dict(m, sd, true), CT_OK);
    ct_sample_free(sd);
    ct_module_eval(m);
    ct_module_eval(c);
    *meta_out = m;
    *cpu_out = c;
}

static void resnet50_on_meta(void **state) {
    (void)state;
    SCOPE_BEGIN;
    ct_module *m, *c;
    build_on_meta("resnet50", build_resnet50, 25557032, &m, &c);
    ct_manual_seed(11);
    ct_tensor *x = ct_randn(CT_SHAPE(2, 3, 64, 64), CT_F32);
    ct_tensor *ym = ct_module_forward1(m, x), *yc = ct_module_forward1(c, x);
    assert_non_null(ym);
    assert_non_null(yc);
    assert_int_equal(ct_size(ym, 1), 1000);
    assert_int_equal(ct_equal(ym, yc), 1); /* bit for bit */
    /* and to meta again: the parameters drop their data */
    assert_int_equal(ct_module_to(m, CT_META), CT_OK);
    ct_tensor *p0;
    assert_true(ct_module_named_parameters(m, NULL, &p0, 1) > 0);
    assert_int_equal(ct_get_device(p0), CT_META);
    ct_module_release(m);
    ct_module_release(c);
    SCOPE_END;
}

static void bert_base_on_meta(void **state) {
    (void)state;
    SCOPE_BEGIN;
    ct_module *m, *c;
    build_on_meta("bert-base", build_bert_base, 109482240, &m, &c);
    int64_t ids[2 * 9] = {101, 7592, 2088, 2003, 1037, 3231, 1012, 102, 0,
                          101, 2023, 2003, 2178, 6251, 102, 0, 0, 0};
    int64_t mask[2 * 9] = {1, 1, 1, 1, 1, 1, 1, 1, 0, 1, 1, 1, 1, 1, 1, 0, 0, 0};
    ct_tensor *x = ct_from_array(ids, CT_SHAPE(2, 9), CT_I64);
    ct_tensor *am = ct_from_array(mask, CT_SHAPE(2, 9), CT_I64);
    ct_tensor *hm = NULL, *pm = NULL, *hc = NULL, *pc = NULL;
    ct_status fst = ct_bert_forward(m, x, am, NULL, &hm, &pm);
    if (fst) printf("forward: %s\n", ct_last_error());
    assert_int_equal(fst, CT_OK);
    assert_int_equal(ct_bert_forward(c, x, am, NULL, &hc, &pc), CT_OK);
    assert_int_equal(ct_size(hm, 2), 768);
    assert_int_equal(ct_equal(hm, hc), 1);
    assert_int_equal(ct_equal(pm, pc), 1);
    ct_module_release(m);
    ct_module_release(c);
    SCOPE_END;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(meta_basics),
        cmocka_unit_test(default_device_and_to),
        cmocka_unit_test(default_device_per_thread),
        cmocka_unit_test(whole_devices),
        cmocka_unit_test(loaders_ignore_default_device),
        cmocka_unit_test(resnet50_on_meta),
        cmocka_unit_test(bert_base_on_meta),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
