/* params.h -- typed op parameters, declared once in params.def.
 *
 * Every op belongs to one parameter family (or to none).  A family is a
 * plain C struct, ct_p_<family>, whose fields are declared in
 * params_<family>.def with these macros:
 *
 *   CT_PARAM_BEGIN(fam)                 starts struct ct_p_<fam>
 *   CT_PARAM(fam, KIND, name)           a scalar: KIND is I64 (int64_t),
 *                                       F64 (double), BOOL (bool),
 *                                       DTYPE (ct_dtype) or STR (const char *,
 *                                       NUL-terminated; autograd nodes keep
 *                                       their own copy)
 *   CT_PARAM_ARR(fam, name, N)          int64_t name[N], all N compared
 *   CT_PARAM_LIST(fam, name, N)         int64_t name[N] plus int name_n: only
 *                                       the first name_n entries count
 *   CT_PARAM_END(fam)
 *   CT_PARAM_OP(op, fam)                op (a name from ops.def) uses fam
 *
 * From that one list come: the struct, the member of ct_params (the union
 * ct_args carries: a->p.<fam>.<name>), the family of every op
 * (ct__op_pfam), and a field descriptor table from which equality, hashing
 * and printing are computed (ct__args_equal / _hash / _print).  Parameters
 * start zeroed (ct__args(op)), so fields an op does not use compare equal.
 * Doubles compare and hash by their bits: 0.0 and -0.0 are different
 * parameters (they can give different results), a NaN equals itself.
 */
#ifndef CT_PARAMS_H
#define CT_PARAMS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ctorch/ctorch.h"

/* ---- the structs ---- */
#define CT_PK_T_I64 int64_t
#define CT_PK_T_F64 double
#define CT_PK_T_BOOL bool
#define CT_PK_T_DTYPE ct_dtype
#define CT_PK_T_STR const char *
#define CT_PARAM_BEGIN(fam) typedef struct ct_p_##fam {
#define CT_PARAM(fam, kind, name) CT_PK_T_##kind name;
#define CT_PARAM_ARR(fam, name, N) int64_t name[N];
#define CT_PARAM_LIST(fam, name, N) int64_t name[N]; int name##_n;
#define CT_PARAM_END(fam) } ct_p_##fam;
#include "params.def"

/* ---- the families ---- */
typedef enum ct_pfam {
    CT_PFAM_none = 0,
#define CT_PARAM_BEGIN(fam) CT_PFAM_##fam,
#include "params.def"
    CT_PFAM_COUNT
} ct_pfam;

typedef union ct_params {
    char none_; /* ops without parameters */
#define CT_PARAM_BEGIN(fam) ct_p_##fam fam;
#include "params.def"
} ct_params;

/* ---- the descriptors (for equality, hash, printing and tests) ---- */
enum { CT_PK_I64, CT_PK_F64, CT_PK_BOOL, CT_PK_DTYPE, CT_PK_STR, CT_PK_ARR, CT_PK_LIST };

typedef struct ct_pfield {
    const char *name;
    int kind;            /* CT_PK_* */
    size_t off;          /* offset in the family struct */
    int n;               /* ARR/LIST capacity, else 1 */
    size_t count_off;    /* LIST: offset of the int count */
} ct_pfield;

typedef struct ct_pfamily_info {
    const char *name;
    size_t size;                /* sizeof(ct_p_<fam>); 0 for none */
    const ct_pfield *fields;
    int nfields;
} ct_pfamily_info;

extern const ct_pfamily_info ct__pfamilies[CT_PFAM_COUNT];
/* The parameter family of each op (CT_PFAM_none when it takes none). */
extern const unsigned char ct__op_pfam[];

#endif
