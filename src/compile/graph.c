/* graph.c -- the compiler's graph IR: building, use counts, printing,
 * freeing.  See compile_impl.h. */
#include "compile_impl.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void ct__graph_init(ct_graph *g) {
    memset(g, 0, sizeof *g);
}

/* Frees a node's copy of its string parameters (einsum's equation). */
static void free_str_params(ct_args *a) {
    const ct_pfamily_info *fi = &ct__pfamilies[ct__op_pfam[a->op]];
    for (int f = 0; f < fi->nfields; f++)
        if (fi->fields[f].kind == CT_PK_STR) {
            char **s = (char **)((char *)&a->p + fi->fields[f].off);
            free(*s);
            *s = NULL;
        }
}

void ct__graph_free(ct_graph *g) {
    if (!g) return;
    for (int i = 0; i < g->nn; i++) {
        free_str_params(&g->n[i].args);
        free(g->n[i].in);
        free(g->n[i].out);
    }
    for (int i = 0; i < g->nconst; i++) ct_release(g->consts[i]);
    free(g->v);
    free(g->n);
    free(g->consts);
    free(g->inputs);
    free(g->outputs);
    free(g->jin_out);
    free(g->wrt);
    free(g->folds);
    memset(g, 0, sizeof *g);
}

static int *dup_ints(const int *a, int n) {
    int *r = malloc(sizeof(int) * (size_t)(n > 0 ? n : 1));
    if (r && n > 0) memcpy(r, a, sizeof(int) * (size_t)n);
    return r;
}

ct_status ct__graph_copy(const ct_graph *src, ct_graph *dst) {
    *dst = *src;
    dst->v = NULL, dst->n = NULL, dst->consts = NULL, dst->inputs = NULL, dst->outputs = NULL;
    dst->jin_out = NULL, dst->wrt = NULL, dst->folds = NULL, dst->nfold = 0;
    dst->nn = dst->cap_n = dst->nconst = dst->cap_const = 0;
    dst->cap_v = dst->nv;
    dst->v = malloc(sizeof *dst->v * (size_t)(src->nv > 0 ? src->nv : 1));
    dst->n = calloc((size_t)(src->nn > 0 ? src->nn : 1), sizeof *dst->n);
    dst->consts = malloc(sizeof *dst->consts * (size_t)(src->nconst > 0 ? src->nconst : 1));
    dst->inputs = dup_ints(src->inputs, src->nin);
    dst->outputs = dup_ints(src->outputs, src->nout);
    if (src->jin_out) dst->jin_out = dup_ints(src->jin_out, src->njin);
    if (src->wrt) dst->wrt = dup_ints(src->wrt, src->nwrt);
    if (!dst->v || !dst->n || !dst->consts || !dst->inputs || !dst->outputs || (src->jin_out && !dst->jin_out) ||
        (src->wrt && !dst->wrt))
        goto oom;
    if (src->nfold) {
        if (!(dst->folds = malloc(sizeof *dst->folds * (size_t)src->nfold))) goto oom;
        memcpy(dst->folds, src->folds, sizeof *dst->folds * (size_t)src->nfold);
        dst->nfold = src->nfold;
    }
    if (src->nv) memcpy(dst->v, src->v, sizeof *dst->v * (size_t)src->nv);
    for (int i = 0; i < src->nconst; i++) dst->consts[dst->nconst++] = ct_retain(src->consts[i]);
    dst->cap_const = src->nconst;
    dst->cap_n = src->nn;
    for (int i = 0; i < src->nn; i++) {
        const ct_gnode *a = &src->n[i];
        ct_gnode *b = &dst->n[i];
        *b = *a;
        b->in = dup_ints(a->in, a->nin);
        b->out = dup_ints(a->out, a->nout);
        dst->nn = i + 1;
        if (!b->in || !b->out) goto oom;
        const ct_pfamily_info *fi = &ct__pfamilies[ct__op_pfam[a->op]];
        for (int f = 0; f < fi->nfields; f++)
            if (fi->fields[f].kind == CT_PK_STR) {
                char **s = (char **)((char *)&b->args.p + fi->fields[f].off);
                if (*s && !(*s = strdup(*s))) goto oom;
            }
    }
    return CT_OK;
oom:
    ct__graph_free(dst);
    return ct__error_status(CT_ERR_OOM, "compile: out of memory copying the graph");
}

static bool grow(void **p, int *cap, int need, size_t elem) {
    if (need <= *cap) return true;
    int nc = *cap ? *cap * 2 : 16;
    while (nc < need) nc *= 2;
    void *q = realloc(*p, (size_t)nc * elem);
    if (!q) return false;
    *p = q;
    *cap = nc;
    return true;
}

int ct__graph_value(ct_graph *g, ct_gv_kind kind, int index, int out, const ct_meta *m) {
    if (!grow((void **)&g->v, &g->cap_v, g->nv + 1, sizeof *g->v)) {
        ct__error(CT_ERR_OOM, "compile: out of memory growing the graph");
        return -1;
    }
    ct_gvalue *v = &g->v[g->nv];
    memset(v, 0, sizeof *v);
    v->kind = kind;
    v->index = index;
    v->out = out;
    if (m) v->meta = *m;
    for (int d = 0; d < CT_MAX_DIMS; d++) v->sym[d] = -1;
    v->alias = -1;
    return g->nv++;
}

int ct__graph_node(ct_graph *g, ct_op op, const ct_args *a, const int *in, int nin, int nout, int dst) {
    if (!grow((void **)&g->n, &g->cap_n, g->nn + 1, sizeof *g->n)) goto oom;
    ct_gnode *n = &g->n[g->nn];
    memset(n, 0, sizeof *n);
    n->op = op;
    n->args = a ? *a : ct__args(op);
    n->args.op = op;
    n->nin = nin;
    n->nout = nout;
    n->dst = dst;
    n->link = -1;
    n->in = malloc(sizeof(int) * (size_t)(nin > 0 ? nin : 1));
    n->out = malloc(sizeof(int) * (size_t)(nout > 0 ? nout : 1));
    if (!n->in || !n->out) {
        free(n->in);
        free(n->out);
        goto oom;
    }
    for (int k = 0; k < nin; k++) n->in[k] = in ? in[k] : -1;
    for (int k = 0; k < nout; k++) n->out[k] = -1;
    /* the node owns copies of its string parameters */
    const ct_pfamily_info *fi = &ct__pfamilies[ct__op_pfam[op]];
    for (int f = 0; f < fi->nfields; f++)
        if (fi->fields[f].kind == CT_PK_STR) {
            char **s = (char **)((char *)&n->args.p + fi->fields[f].off);
            if (*s && !(*s = strdup(*s))) {
                free(n->in);
                free(n->out);
                goto oom;
            }
        }
    return g->nn++;
oom:
    ct__error(CT_ERR_OOM, "compile: out of memory growing the graph");
    return -1;
}

void ct__graph_uses(ct_graph *g) {
    for (int i = 0; i < g->nv; i++) g->v[i].nuses = 0;
    for (int i = 0; i < g->nn; i++) {
        const ct_gnode *n = &g->n[i];
        if (n->dead) continue;
        for (int k = 0; k < n->nin; k++)
            if (n->in[k] >= 0) g->v[n->in[k]].nuses++;
        if (n->dst >= 0) g->v[n->dst].nuses++;
    }
    for (int k = 0; k < g->nout; k++)
        if (g->outputs[k] >= 0) g->v[g->outputs[k]].nuses++;
}

/* ---- printing ---- */
/* The end of the "name=value" item at p (a ", " or the closing ")" outside brackets). */
static const char *item_end(const char *p) {
    int depth = 0;
    for (; *p; p++) {
        if (*p == '[' || *p == '(') depth++;
        else if ((*p == ']' || *p == ')') && depth > 0) depth--;
        else if (depth == 0 && (*p == ')' || (*p == ',' && p[1] == ' '))) break;
    }
    return p;
}

typedef struct { char *s; size_t len, cap; bool oom; } sbuf;

static void sb_printf(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(sbuf *b, const char *fmt, ...) {
    if (b->oom) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(b->s ? b->s + b->len : NULL, b->s ? b->cap - b->len : 0, fmt, ap);
        va_end(ap);
        if (n < 0) { b->oom = true; return; }
        if (b->s && b->len + (size_t)n < b->cap) { b->len += (size_t)n; return; }
        size_t nc = b->cap ? b->cap * 2 : 1024;
        while (nc < b->len + (size_t)n + 1) nc *= 2;
        char *q = realloc(b->s, nc);
        if (!q) { b->oom = true; return; }
        b->s = q;
        b->cap = nc;
    }
}

/* The parameters of ct__args_str's "op(a=1, b=2)" (from after the "("),
 * less those equal to the op's defaults (def, printed the same way): the
 * items are the same fields in the same order. */
static void put_params(sbuf *b, const char *a, const char *def) {
    int shown = 0;
    while (*a && *a != ')') {
        const char *e = item_end(a), *de = *def ? item_end(def) : def;
        bool same = (size_t)(e - a) == (size_t)(de - def) && !strncmp(a, def, (size_t)(e - a));
        if (!same) sb_printf(b, "%s%.*s", shown++ ? ", " : " {", (int)(e - a), a);
        a = *e == ',' ? e + 2 : e;
        def = *de == ',' ? de + 2 : de;
    }
    if (shown) sb_printf(b, "}");
}

static void sb_type(sbuf *b, const ct_graph *g, int v) {
    const ct_gvalue *x = &g->v[v];
    sb_printf(b, "%s[", ct_dtype_name(x->meta.dtype));
    for (int d = 0; d < x->meta.ndim; d++) {
        if (x->sym[d] >= 0) sb_printf(b, "%ss%d", d ? ", " : "", x->sym[d]);
        else sb_printf(b, "%s%lld", d ? ", " : "", (long long)x->meta.sizes[d]);
    }
    sb_printf(b, "]");
}

char *ct__graph_str(const ct_graph *g) {
    sbuf b = {0};
    sb_printf(&b, "graph(");
    for (int k = 0; k < g->nin; k++) {
        sb_printf(&b, "%s%%%d: ", k ? ", " : "", g->inputs[k]);
        sb_type(&b, g, g->inputs[k]);
    }
    sb_printf(&b, ")\n");
    for (int i = 0; i < g->nv; i++)
        if (g->v[i].kind == CT_GV_CONST) {
            sb_printf(&b, "  %%%d = const #%d : ", i, g->v[i].index);
            sb_type(&b, g, i);
            sb_printf(&b, "\n");
        }
    for (int i = 0; i < g->nn; i++) {
        const ct_gnode *n = &g->n[i];
        if (n->dead) continue;
        sb_printf(&b, "  ");
        int shown = 0;
        for (int k = 0; k < n->nout; k++)
            if (n->out[k] >= 0) sb_printf(&b, "%s%%%d", shown++ ? ", " : "", n->out[k]);
        if (!shown) sb_printf(&b, "_");
        sb_printf(&b, " = %s(", ct__op_info[n->op].name);
        if (n->dst >= 0) sb_printf(&b, "out=%%%d%s", n->dst, n->nin ? ", " : "");
        for (int k = 0; k < n->nin; k++) {
            if (n->in[k] >= 0) sb_printf(&b, "%s%%%d", k ? ", " : "", n->in[k]);
            else sb_printf(&b, "%sNULL", k ? ", " : "");
        }
        sb_printf(&b, ")");
        /* the parameters as ct__args_str prints them: "op(a=1, ...)" */
        if (ct__op_pfam[n->op] != CT_PFAM_none) {
            ct_args def = ct__args(n->op);
            char *as = ct__args_str(&n->args), *ds = ct__args_str(&def);
            const char *open = as ? strchr(as, '(') : NULL, *dopen = ds ? strchr(ds, '(') : NULL;
            if (open) put_params(&b, open + 1, dopen ? dopen + 1 : "");
            free(as);
            free(ds);
        }
        sb_printf(&b, " :");
        for (int k = 0; k < n->nout; k++)
            if (n->out[k] >= 0) {
                sb_printf(&b, " ");
                sb_type(&b, g, n->out[k]);
            }
        sb_printf(&b, "\n");
    }
    sb_printf(&b, "  return");
    for (int k = 0; k < g->nout; k++) sb_printf(&b, "%s %%%d", k ? "," : "", g->outputs[k]);
    sb_printf(&b, "\n");
    if (g->brk[0]) sb_printf(&b, "  graph break: %s\n", g->brk);
    if (b.oom) {
        free(b.s);
        return ct__error(CT_ERR_OOM, "compile: out of memory printing the graph");
    }
    return b.s;
}
