/* test_hostile_io.c -- regression tests for hostile-input findings (fuzzing)
 * in the readers and writers of files from outside:
 *   - a safetensors file truncated while tensors loaded from it live
 *     (was SIGBUS: ct_safetensors_load mapped the file);
 *   - a model config.json whose sizes contradict model.safetensors (was a
 *     multi-GB allocation before the weights were looked at);
 *   - temporaries of killed saves (were never removed);
 *   - CSV: byte-order mark, NUL bytes, hex, overflow to inf, duplicate
 *     column names, in both readers (DataFrame and dataset);
 *   - the load_state_dict error message (missing, unexpected, size
 *     mismatches, no stray punctuation). */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <ctorch/ctorch.h>
#include <ctorch/data.h>
#include <ctorch/io.h>
#include <ctorch/models.h>

#include "io/io_impl.h"
#include "test_util.h"

static char g_dir[64];

static void path_in(char *buf, size_t n, const char *name) { snprintf(buf, n, "%s/%s", g_dir, name); }

static bool exists(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0;
}

static long peak_rss_kb(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* a pid that no process has: a child that exited and was reaped */
static pid_t dead_pid(void) {
    pid_t p = fork();
    assert_true(p >= 0);
    if (p == 0) _exit(0);
    int stw;
    assert_int_equal(waitpid(p, &stw, 0), p);
    assert_int_equal(kill(p, 0), -1);
    assert_int_equal(errno, ESRCH);
    return p;
}

/* ---- 2. config.json against model.safetensors ------------------------------------
 * First: ru_maxrss is the peak of the whole process, so this runs before
 * the tests that allocate. */
static void make_model_dir(char *dir, size_t n, const char *config) {
    snprintf(dir, n, "%s/model", g_dir);
    mkdir(dir, 0700);
    char p[256];
    snprintf(p, sizeof p, "%s/vocab.txt", dir);
    copy_file(CT_FIXTURE_DIR "/minilm_tiny/vocab.txt", p);
    snprintf(p, sizeof p, "%s/model.safetensors", dir); /* a real small BertModel: hidden 32, 2 layers */
    copy_file(CT_FIXTURE_DIR "/minilm_tiny/model.safetensors", p);
    snprintf(p, sizeof p, "%s/config.json", dir);
    write_bytes(p, config, strlen(config));
}

static void expect_fast_small_failure(const char *config, const char *const *parts, int nparts) {
    char dir[128];
    make_model_dir(dir, sizeof dir, config);
    long rss0 = peak_rss_kb();
    double t0 = now_s();
    ct_sentence_encoder *e = ct_sentence_encoder_load(dir);
    double dt = now_s() - t0;
    long grown_mb = (peak_rss_kb() - rss0) / 1024;
    printf("    load failed in %.3f s, peak RSS +%ld MB: %s\n", dt, grown_mb, ct_last_error());
    if (e) ct_sentence_encoder_free(e);
    assert_null(e);
    assert_int_equal(ct_last_error_code(), CT_ERR_FORMAT);
    for (int i = 0; i < nparts; i++)
        if (!strstr(ct_last_error(), parts[i])) fail_msg("error \"%s\" lacks \"%s\"", ct_last_error(), parts[i]);
    assert_true(grown_mb < 200);
    assert_true(dt < 5.0);
    ct_clear_error();
}

static void test_config_vs_weights(void **state) {
    (void)state;
    /* within the sane bounds, but not the file's sizes: would allocate
     * ~1.7 GB (vocab 262144 x hidden 1024, 12 layers of 1024 x 16384) */
    static const char big[] =
        "{\"hidden_act\": \"gelu\", \"hidden_size\": 1024, \"intermediate_size\": 16384, "
        "\"max_position_embeddings\": 4096, \"model_type\": \"bert\", \"num_attention_heads\": 16, "
        "\"num_hidden_layers\": 12, \"type_vocab_size\": 2, \"vocab_size\": 262144}";
    expect_fast_small_failure(big,
                              (const char *const[]){"config.json does not match model.safetensors",
                                                    "hidden_size is 1024 but embeddings.word_embeddings.weight "
                                                    "has shape [83, 32]",
                                                    "vocab_size is 262144",
                                                    "max_position_embeddings is 4096",
                                                    "num_hidden_layers is 12 but the file has 2 layers"},
                              5);
    /* the fuzzer's kind of file: 612 bytes, huge sizes */
    static const char huge[] =
        "{\n  \"architectures\": [\"BertModel\"],\n  \"attention_probs_dropout_prob\": 0.1,\n"
        "  \"classifier_dropout\": null,\n  \"gradient_checkpointing\": false,\n  \"hidden_act\": \"gelu\",\n"
        "  \"hidden_dropout_prob\": 0.1,\n  \"hidden_size\": 1000000000,\n  \"initializer_range\": 0.02,\n"
        "  \"intermediate_size\": 1000000000,\n  \"layer_norm_eps\": 1e-12,\n"
        "  \"max_position_embeddings\": 1000000000,\n  \"model_type\": \"bert\",\n"
        "  \"num_attention_heads\": 4,\n  \"num_hidden_layers\": 100000,\n  \"pad_token_id\": 0,\n"
        "  \"position_embedding_type\": \"absolute\",\n  \"torch_dtype\": \"float32\",\n"
        "  \"transformers_version\": \"4.41.2\",\n  \"type_vocab_size\": 2,\n  \"use_cache\": true,\n"
        "  \"vocab_size\": 1000000000\n}\n";
    expect_fast_small_failure(huge, (const char *const[]){"sentence_encoder_load", "hidden_size 1000000000"}, 2);
    /* only intermediate_size wrong */
    static const char inter[] =
        "{\"hidden_size\": 32, \"intermediate_size\": 65536, \"max_position_embeddings\": 64, "
        "\"num_attention_heads\": 4, \"num_hidden_layers\": 2, \"type_vocab_size\": 2, \"vocab_size\": 83}";
    expect_fast_small_failure(inter, (const char *const[]){"intermediate_size is 65536 but "
                                                           "encoder.layer.0.intermediate.dense.weight has shape "
                                                           "[64, 32]"},
                              1);
    /* and the real config still loads */
    char dir[128], p[256];
    make_model_dir(dir, sizeof dir, "{}");
    snprintf(p, sizeof p, "%s/config.json", dir);
    copy_file(CT_FIXTURE_DIR "/minilm_tiny/config.json", p);
    ct_sentence_encoder *e = ct_sentence_encoder_load(dir);
    if (!e) fail_msg("%s", ct_last_error());
    assert_int_equal(ct_sentence_encoder_dim(e), 32);
    ct_sentence_encoder_free(e);
}

/* ---- 1. truncation after load ------------------------------------------------------ */
/* In a child (a SIGBUS must not take the test runner down): load with
 * load(), truncate the file to 0 bytes, read every element. */
static void truncate_after_load(const char *p, ct_sample *(*load)(const char *), bool by_open) {
    const int64_t n = 1 << 20; /* 4 MiB: many pages */
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        signal(SIGBUS, SIG_DFL); /* die of it: not cmocka's handler, which would run on in the child */
        signal(SIGSEGV, SIG_DFL);
        ct_tensor *t = NULL;
        ct_sample *s = NULL;
        ct_safetensors *f = NULL;
        if (by_open) {
            f = ct_safetensors_open(p);
            if (!f) _exit(10);
            if (truncate(p, 0) != 0) _exit(11);
            t = ct_safetensors_get(f, "x"); /* lazily, after the truncation */
        } else {
            s = load(p);
            if (!s) _exit(10);
            if (truncate(p, 0) != 0) _exit(11);
            t = ct_sample_get(s, "x");
        }
        if (!t || ct_numel(t) != n || ct_get_dtype(t) != CT_F32) _exit(12);
        const float *d = ct_data_ptr(t);
        for (int64_t i = 0; i < n; i++)
            if (d[i] != (float)(i % 1000) - 0.5f) _exit(13);
        ct_sample_free(s);
        ct_safetensors_close(f);
        _exit(0);
    }
    int stw;
    assert_int_equal(waitpid(pid, &stw, 0), pid);
    if (WIFSIGNALED(stw)) fail_msg("the reader died of signal %d (%s)", WTERMSIG(stw), strsignal(WTERMSIG(stw)));
    assert_true(WIFEXITED(stw));
    assert_int_equal(WEXITSTATUS(stw), 0);
}

/* 4 MiB of float32 under "x".  Built in the parent: children only
 * serialize or read (no OpenMP, which is not fork-safe). */
static ct_sample *g_big;

static void save_big(const char *p) {
    if (!g_big) {
        const int64_t n = 1 << 20;
        float *v = malloc(sizeof *v * (size_t)n);
        assert_non_null(v);
        for (int64_t i = 0; i < n; i++) v[i] = (float)(i % 1000) - 0.5f;
        ct_scope sc = ct_scope_begin();
        g_big = ct_sample_new();
        assert_int_equal(ct_sample_set(g_big, "x", ct_from_array(v, CT_SHAPE(n), CT_F32)), CT_OK);
        ct_scope_end(sc);
        free(v);
    }
    assert_int_equal(ct_safetensors_save(p, g_big, NULL), CT_OK);
}

static void test_truncate_after_load(void **state) {
    (void)state;
    char p[256];
    path_in(p, sizeof p, "trunc.safetensors");
    save_big(p);
    truncate_after_load(p, ct_safetensors_load, false);
    save_big(p);
    truncate_after_load(p, NULL, true);
    /* the mapping stays available on request (and, untruncated, works) */
    save_big(p);
    ct_scope sc = ct_scope_begin();
    ct_sample *m = ct_safetensors_load_mmap(p);
    assert_non_null(m);
    ct_tensor *x = ct_sample_get(m, "x");
    assert_float_equal(((const float *)ct_data_ptr(x))[1234], 233.5f, 0);
    ct_sample_free(m);
    ct_safetensors *f = ct_safetensors_open_mmap(p);
    assert_non_null(f);
    assert_int_equal(ct_safetensors_count(f), 1);
    ct_safetensors_close(f);
    expect_err(ct_safetensors_open_mmap(g_dir), CT_ERR_IO, "not a regular file");
    ct_scope_end(sc);
    unlink(p);
}

/* ---- 3. stale temporaries of killed saves ----------------------------------------- */
static int g_kill_after;
static void kill_hook(size_t written) {
    if (written >= (size_t)g_kill_after) raise(SIGKILL);
}

static int count_prefix(const char *prefix) {
    DIR *d = opendir(g_dir);
    assert_non_null(d);
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)))
        if (!strncmp(de->d_name, prefix, strlen(prefix))) n++;
    closedir(d);
    return n;
}

static int count_temps(const char *base) {
    char pre[200];
    snprintf(pre, sizeof pre, "%s.tmp.", base);
    return count_prefix(pre);
}

static void touch(const char *name, size_t bytes) {
    char p[256];
    path_in(p, sizeof p, name);
    char *z = calloc(1, bytes ? bytes : 1);
    write_bytes(p, z, bytes);
    free(z);
}

static bool exists_in(const char *name) {
    char p[256];
    path_in(p, sizeof p, name);
    return exists(p);
}

static void test_stale_temporaries(void **state) {
    (void)state;
    char p[256], name[160];
    path_in(p, sizeof p, "ck.safetensors");
    save_big(p); /* g_big exists before the forks */
    unlink(p);
    /* real kills in the middle of a save: each leaves its temporary, and
     * the next save removes the previous one (at most one is left, where
     * 50 kills used to leave 50) */
    for (int k = 0; k < 3; k++) {
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            g_kill_after = 1 << 20; /* after the first 1 MiB chunk */
            ct__io_write_hook = kill_hook;
            save_big(p);
            _exit(3); /* not reached */
        }
        int stw;
        assert_int_equal(waitpid(pid, &stw, 0), pid);
        assert_true(WIFSIGNALED(stw) && WTERMSIG(stw) == SIGKILL);
        assert_int_equal(count_temps("ck.safetensors"), 1);
        snprintf(name, sizeof name, "ck.safetensors.tmp.%d.", (int)pid);
        assert_int_equal(count_prefix(name), 1); /* the last child's */
    }
    assert_false(exists(p));

    /* fakes: dead writers of this target (removed), and files that must stay */
    pid_t dead = dead_pid(), me = getpid();
    snprintf(name, sizeof name, "ck.safetensors.tmp.%d.abcDE1", (int)dead);
    touch(name, 4096);
    snprintf(name, sizeof name, "ck.safetensors.tmp.%d.Zz9yx0", (int)dead);
    touch(name, 10);
    snprintf(name, sizeof name, "ck.safetensors.tmp.%d.qwerty", (int)me); /* a live writer (us) */
    touch(name, 10);
    snprintf(name, sizeof name, "other.safetensors.tmp.%d.abcdef", (int)me); /* live, other target */
    touch(name, 10);
    snprintf(name, sizeof name, "other.safetensors.tmp.%d.abcdef", (int)dead); /* dead, other target */
    touch(name, 10);
    snprintf(name, sizeof name, "ck.safetensors.tmp.%d.abc", (int)dead); /* not our name pattern */
    touch(name, 10);
    snprintf(name, sizeof name, "ck.safetensors.tmp.%d", (int)dead); /* nor this */
    touch(name, 10);
    snprintf(name, sizeof name, "ck.safetensors.tmp.%d.locked", (int)dead); /* dead pid, but locked: */
    touch(name, 10);                                                     /* a writer elsewhere */
    char lp[256];
    path_in(lp, sizeof lp, name);
    int lfd = open(lp, O_RDONLY);
    assert_true(lfd >= 0);
    assert_int_equal(flock(lfd, LOCK_EX), 0);
    assert_int_equal(count_temps("ck.safetensors"), 7);

    save_big(p); /* the next save of the target cleans up */
    assert_true(exists(p));
    assert_int_equal(count_temps("ck.safetensors"), 4); /* ours, .abc, no suffix, locked */
    snprintf(name, sizeof name, "ck.safetensors.tmp.%d.abcDE1", (int)dead);
    assert_false(exists_in(name));
    snprintf(name, sizeof name, "ck.safetensors.tmp.%d.qwerty", (int)me);
    assert_true(exists_in(name));
    snprintf(name, sizeof name, "other.safetensors.tmp.%d.abcdef", (int)me);
    assert_true(exists_in(name));
    snprintf(name, sizeof name, "other.safetensors.tmp.%d.abcdef", (int)dead);
    assert_true(exists_in(name));
    snprintf(name, sizeof name, "ck.safetensors.tmp.%d.abc", (int)dead);
    assert_true(exists_in(name));
    snprintf(name, sizeof name, "ck.safetensors.tmp.%d", (int)dead);
    assert_true(exists_in(name));
    assert_true(exists(lp));
    close(lfd);
    /* unlocked now: the next save removes it */
    save_big(p);
    assert_false(exists(lp));
    assert_int_equal(count_temps("ck.safetensors"), 3);

    /* the saved file is whole */
    ct_scope sc = ct_scope_begin();
    ct_sample *s = ct_safetensors_load(p);
    assert_non_null(s);
    assert_float_equal(((const float *)ct_data_ptr(ct_sample_get(s, "x")))[999], 998.5f, 0);
    ct_sample_free(s);
    ct_scope_end(sc);

    /* to_csv saves the same way */
    char cp[256];
    path_in(cp, sizeof cp, "t.csv");
    snprintf(name, sizeof name, "t.csv.tmp.%d.AAAAAA", (int)dead);
    touch(name, 10);
    ct_df *df = ct_df_read_csv_buffer("a,b\n1,x\n", 8, NULL);
    assert_non_null(df);
    assert_int_equal(ct_df_to_csv(df, cp, NULL), CT_OK);
    ct_df_free(df);
    assert_false(exists_in(name));
    assert_int_equal(count_temps("t.csv"), 0);
    struct stat sb;
    assert_int_equal(stat(cp, &sb), 0);
    mode_t um = umask(0);
    umask(um);
    assert_int_equal(sb.st_mode & 0777, 0666 & ~um);

    /* clean up what we made */
    DIR *d = opendir(g_dir);
    struct dirent *de;
    while ((de = readdir(d)))
        if (strstr(de->d_name, ".tmp.")) {
            char q[400];
            snprintf(q, sizeof q, "%s/%s", g_dir, de->d_name);
            unlink(q);
        }
    closedir(d);
    unlink(p);
    unlink(cp);
}

/* ---- 4. CSV ------------------------------------------------------------------------ */
static void expect_df_error(const char *csv, size_t n, const char *msg) {
    ct_df *df = ct_df_read_csv_buffer(csv, n, NULL);
    if (df) {
        ct_df_free(df);
        fail_msg("read_csv accepted %zu bytes; wanted \"%s\"", n, msg);
    }
    assert_int_equal(ct_last_error_code(), CT_ERR_FORMAT);
    assert_string_equal(ct_last_error(), msg);
    ct_clear_error();
}

static void expect_ds_error(const char *csv, size_t n, const char *label, ct_dtype dt, const char *msg) {
    ct_dataset *d = ct_csv_dataset_from_buffer(csv, n, label, dt);
    if (d) {
        ct_dataset_release(d);
        fail_msg("csv_dataset accepted %zu bytes; wanted \"%s\"", n, msg);
    }
    assert_int_equal(ct_last_error_code(), CT_ERR_FORMAT);
    assert_string_equal(ct_last_error(), msg);
    ct_clear_error();
}

#define LIT(s) s, sizeof(s) - 1

static void test_csv_bom(void **state) {
    (void)state;
    ct_df *df = ct_df_read_csv_buffer(LIT("\xEF\xBB\xBFid,v\n1,2.5\n"), NULL);
    assert_non_null(df);
    assert_string_equal(ct_df_column_name(df, 0), "id");
    assert_non_null(ct_df_column(df, "id"));
    ct_df_free(df);
    df = ct_df_read_csv_buffer(LIT("\xEF\xBB\xBF\"q\",v\n1,2\n"), NULL); /* quoted first name */
    assert_non_null(df);
    assert_string_equal(ct_df_column_name(df, 0), "q");
    ct_df_free(df);
    /* and from a file */
    char p[256];
    path_in(p, sizeof p, "bom.csv");
    write_bytes(p, LIT("\xEF\xBB\xBFlabel,x\n1,2\n0,3\n"));
    df = ct_df_read_csv(p, NULL);
    assert_non_null(df);
    assert_string_equal(ct_df_column_name(df, 0), "label");
    ct_df_free(df);
    ct_dataset *d = ct_csv_dataset_new(p, "label", CT_I64);
    if (!d) fail_msg("%s", ct_last_error());
    assert_int_equal(ct_dataset_len(d), 2);
    ct_scope sc = ct_scope_begin();
    ct_sample *sm = ct_sample_new();
    assert_int_equal(ct_dataset_get(d, 1, sm), CT_OK);
    assert_int_equal(ct_item_int(ct_sample_get(sm, "label")), 0);
    assert_float_equal(((const float *)ct_data_ptr(ct_sample_get(sm, "features")))[0], 3.0f, 0);
    ct_sample_free(sm);
    ct_scope_end(sc);
    ct_dataset_release(d);
    unlink(p);
}

static void test_csv_nul(void **state) {
    (void)state;
    expect_df_error(LIT("a,b\n1,2\n3\0,4\n"), "read_csv: line 3, column 1: NUL byte in a field");
    expect_df_error(LIT("a,b\n1,2\n3,\"4\0\"\n"), "read_csv: line 3, column 2: NUL byte in a field");
    expect_df_error(LIT("a\0b,c\n1,2\n"), "read_csv: line 1, column 1: NUL byte in a field");
    expect_ds_error(LIT("a,b\n1,2\n3\0,4\n"), NULL, CT_F32, "csv_dataset: line 3, column 1: NUL byte in a field");
    expect_ds_error(LIT("a,b\n1,2\n3,\"4\0\"\n"), NULL, CT_F32, "csv_dataset: line 3, column 2: NUL byte in a field");
}

static void test_csv_strict_numbers(void **state) {
    (void)state;
    /* dataset: every field a decimal number */
    expect_ds_error(LIT("a,b\n0x10,1\n"), NULL, CT_F32, "csv_dataset: line 2, column 1 ('a'): '0x10' is not a number");
    expect_ds_error(LIT("a,b\n1,0X1p3\n"), NULL, CT_F32, "csv_dataset: line 2, column 2 ('b'): '0X1p3' is not a number");
    expect_ds_error(LIT("a,b\n1,2\n1e400,2\n"), NULL, CT_F32,
                    "csv_dataset: line 3, column 1 ('a'): '1e400' is out of range for float64");
    expect_ds_error(LIT("a,b\n1,-1e400\n"), "b", CT_F64,
                    "csv_dataset: line 2, column 2 ('b'): '-1e400' is out of range for float64");
    expect_ds_error(LIT("a,b\n1e39,1\n"), NULL, CT_F32,
                    "csv_dataset: line 2, column 1 ('a'): '1e39' is out of range for float32");
    expect_ds_error(LIT("a,b\n1,1e39\n"), "b", CT_F32,
                    "csv_dataset: line 2, column 2 ('b'): '1e39' is out of range for float32");
    expect_ds_error(LIT("a,b\n1,2x\n"), NULL, CT_F32, "csv_dataset: line 2, column 2 ('b'): '2x' is not a number");
    /* accepted: blanks, explicit inf/nan (like pandas), underflow, a float64 label beyond float32 */
    ct_dataset *d = ct_csv_dataset_from_buffer(LIT("a,b,c,l\n 1.5 ,inf,-Infinity,1e39\nNaN,1e-400,-0,2\n"), "l", CT_F64);
    if (!d) fail_msg("%s", ct_last_error());
    ct_scope sc = ct_scope_begin();
    ct_sample *sm = ct_sample_new();
    assert_int_equal(ct_dataset_get(d, 0, sm), CT_OK);
    const float *x = ct_data_ptr(ct_sample_get(sm, "features"));
    assert_float_equal(x[0], 1.5f, 0);
    assert_true(isinf(x[1]) && x[1] > 0);
    assert_true(isinf(x[2]) && x[2] < 0);
    assert_float_equal(ct_item(ct_sample_get(sm, "label")), 1e39, 0);
    assert_int_equal(ct_dataset_get(d, 1, sm), CT_OK);
    x = ct_data_ptr(ct_sample_get(sm, "features"));
    assert_true(isnan(x[0]));
    assert_float_equal(x[1], 0.0f, 0);
    ct_sample_free(sm);
    ct_scope_end(sc);
    ct_dataset_release(d);

    /* DataFrame: hex is not a number (a string column, as in pandas) */
    ct_df *df = ct_df_read_csv_buffer(LIT("a,b\n0x10,1\n2,0x1p3\n"), NULL);
    assert_non_null(df);
    assert_int_equal(ct_column_type(ct_df_column(df, "a")), CT_DF_STRING);
    assert_int_equal(ct_column_type(ct_df_column(df, "b")), CT_DF_STRING);
    ct_df_free(df);
    /* overflow in a float column is an error naming line, column and name */
    expect_df_error(LIT("x,y\n1,2.5\n3,1e400\n"), "read_csv: line 3, column 2 ('y'): '1e400' is out of range for float64");
    expect_df_error(LIT("x,y\n\"1\n\",2.5\n3, -1e999 \n"),
                    "read_csv: line 4, column 2 ('y'): ' -1e999 ' is out of range for float64");
    /* but not in a string column, and explicit inf/nan stay numbers */
    df = ct_df_read_csv_buffer(LIT("s,f\n1e400,inf\nabc,-Infinity\nx,nan\n"), NULL);
    assert_non_null(df);
    assert_int_equal(ct_column_type(ct_df_column(df, "s")), CT_DF_STRING);
    assert_int_equal(ct_column_type(ct_df_column(df, "f")), CT_DF_FLOAT64);
    assert_true(isinf(ct_column_get_double(ct_df_column(df, "f"), 1)));
    ct_df_free(df);
}

static void test_csv_duplicate_names(void **state) {
    (void)state;
    /* the dataset: an error naming the name */
    expect_ds_error(LIT("x,y,x\n1,2,3\n"), NULL, CT_F32, "csv_dataset: line 1, column 3: duplicate column name 'x'");
    expect_ds_error(LIT("\n\nlabel,a,label\n1,2,3\n"), "label", CT_I64,
                    "csv_dataset: line 3, column 3: duplicate column name 'label'");
    /* the DataFrame: pandas' mangling (mangle_dupe_cols) */
    ct_df *df = ct_df_read_csv_buffer(LIT("a,b,a,a.1,a,b\n1,2,3,4,5,6\n"), NULL);
    assert_non_null(df);
    const char *want[] = {"a", "b", "a.1", "a.1.1", "a.2", "b.1"};
    assert_int_equal(ct_df_num_columns(df), 6);
    for (int i = 0; i < 6; i++) assert_string_equal(ct_df_column_name(df, i), want[i]);
    assert_int_equal((int)ct_column_get_double(ct_df_column(df, "a.2"), 0), 5);
    ct_df_free(df);
    /* many duplicates: linear time */
    size_t n = 100000;
    char *big = malloc(2 * n + 4);
    for (size_t i = 0; i < n; i++) { big[2 * i] = 'c'; big[2 * i + 1] = i + 1 < n ? ',' : '\n'; }
    double t0 = now_s();
    df = ct_df_read_csv_buffer(big, 2 * n, NULL);
    assert_non_null(df);
    assert_string_equal(ct_df_column_name(df, (int)n - 1), "c.99999");
    ct_df_free(df);
    expect_ds_error(big, 2 * n, NULL, CT_F32, "csv_dataset: line 1, column 2: duplicate column name 'c'");
    double dt = now_s() - t0;
    free(big);
    assert_true(dt < 15.0); /* ~0.6 s optimized, ~2.5 s under ASan */
}

/* ---- 5. the load_state_dict message ------------------------------------------------ */
static void test_state_dict_message(void **state) {
    (void)state;
    ct_scope sc = ct_scope_begin();
    ct_module *bn = ct_batch_norm1d_new(4, 1e-5, 0.1, true, true);
    ct_module *lin = ct_linear_new(4, 3, true);
    ct_module *lin_nb = ct_linear_new(4, 3, false);
    ct_sample *sd = ct_module_state_dict(bn);
    assert_non_null(sd);
    assert_int_equal(ct_module_load_state_dict(lin, sd, true), CT_ERR_ARG);
    assert_string_equal(ct_last_error(),
                        "Error(s) in loading state_dict for Linear: Unexpected key(s) in state_dict: "
                        "\"running_mean\", \"running_var\", \"num_batches_tracked\"; size mismatch for weight: "
                        "copying a param with shape [4] from checkpoint, the shape in current model is [3, 4]; "
                        "size mismatch for bias: copying a param with shape [4] from checkpoint, the shape in "
                        "current model is [3].");
    /* not strict: only the size mismatches */
    assert_int_equal(ct_module_load_state_dict(lin, sd, false), CT_ERR_SHAPE);
    assert_string_equal(ct_last_error(),
                        "Error(s) in loading state_dict for Linear: size mismatch for weight: copying a param "
                        "with shape [4] from checkpoint, the shape in current model is [3, 4]; size mismatch for "
                        "bias: copying a param with shape [4] from checkpoint, the shape in current model is [3].");
    /* missing and unexpected together */
    ct_sample_free(sd);
    sd = ct_module_state_dict(lin_nb);
    assert_int_equal(ct_sample_set(sd, "extra", ct_zeros(CT_SHAPE(1), CT_F32)), CT_OK);
    assert_int_equal(ct_module_load_state_dict(lin, sd, true), CT_ERR_ARG);
    assert_string_equal(ct_last_error(),
                        "Error(s) in loading state_dict for Linear: Missing key(s) in state_dict: \"bias\"; "
                        "Unexpected key(s) in state_dict: \"extra\".");
    /* only missing */
    ct_sample_clear(sd);
    assert_int_equal(ct_sample_set(sd, "weight", ct_zeros(CT_SHAPE(3, 4), CT_F32)), CT_OK);
    assert_int_equal(ct_module_load_state_dict(lin, sd, true), CT_ERR_ARG);
    assert_string_equal(ct_last_error(),
                        "Error(s) in loading state_dict for Linear: Missing key(s) in state_dict: \"bias\".");
    assert_int_equal(ct_module_load_state_dict(lin, sd, false), CT_OK); /* loads what is there */
    /* long lists are cut, and the message stays whole */
    ct_sample_clear(sd);
    char key[64];
    for (int i = 0; i < 200; i++) {
        snprintf(key, sizeof key, "layer%03d.some_long_parameter_name", i);
        assert_int_equal(ct_sample_set(sd, key, ct_zeros(CT_SHAPE(1), CT_F32)), CT_OK);
    }
    assert_int_equal(ct_module_load_state_dict(lin, sd, true), CT_ERR_ARG);
    assert_non_null(strstr(ct_last_error(), "more)"));
    assert_true(ct_last_error()[strlen(ct_last_error()) - 1] == '.');
    ct_sample_free(sd);
    ct_module_release(bn);
    ct_module_release(lin);
    ct_module_release(lin_nb);
    ct_scope_end(sc);
    ct_clear_error();
}

static int setup(void **state) {
    (void)state;
    snprintf(g_dir, sizeof g_dir, "/tmp/ct_hostile_io_XXXXXX");
    return mkdtemp(g_dir) ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    char p[256];
    snprintf(p, sizeof p, "%s/model", g_dir);
    const char *names[] = {"vocab.txt", "model.safetensors", "config.json"};
    for (int i = 0; i < 3; i++) {
        char q[300];
        snprintf(q, sizeof q, "%s/%s", p, names[i]);
        unlink(q);
    }
    rmdir(p);
    rmdir(g_dir);
    ct_sample_free(g_big);
    return 0;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_config_vs_weights), /* first: it measures the peak RSS */
        cmocka_unit_test(test_truncate_after_load),
        cmocka_unit_test(test_stale_temporaries),
        cmocka_unit_test(test_csv_bom),
        cmocka_unit_test(test_csv_nul),
        cmocka_unit_test(test_csv_strict_numbers),
        cmocka_unit_test(test_csv_duplicate_names),
        cmocka_unit_test(test_state_dict_message),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
