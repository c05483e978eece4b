/* render.h -- private: the C expression of an elementwise op, rendered from
 * ew_math.def (tinygrad's code_for_op: one op -> one expression per dtype).
 *
 * The expression is the same text the CPU kernels were generated from
 * (ew_math.def's #expr), made self-contained for one dtype: the operands
 * x, y, z become the caller's operand expressions (parenthesized), scalar_t
 * the dtype's C type, and each ew.<field> the parameter's value as an exact
 * C literal (a double as a hexadecimal float, %a, or INFINITY / NAN; an
 * int64 as an integer constant cast to int64_t; a bool as 0 or 1).  The
 * result still calls <tgmath.h> math and the helpers of ew_scalar.h, so a
 * program that evaluates it starts with ct__ew_prelude() and is compiled
 * with src/ops on its include path.  The loop that stores it converts it to
 * the output type, (ct__ew_ctype(ct__ew_out_dtype(op, dt)))(expr), as the
 * kernels do.
 *
 *     const char *ops[2] = {"a[i]", "b[i]"};
 *     ct_args a = ct__args(CT_OP_add);
 *     a.p.ew.has_alpha = true, a.p.ew.alpha = 2;
 *     char *e = ct__ew_render(CT_OP_add, CT_F32, ops, &a.p.ew);
 *     // "(a[i]) + (1 ? (float)(0x1p+1) * (b[i]) : (b[i]))"
 *     free(e);
 */
#ifndef CT_RENDER_H
#define CT_RENDER_H

#include "op_table.h"

/* The loop shapes of ew_math.def */
enum { CT_EWK_NONE = 0, CT_EWK_UNARY, CT_EWK_BINARY, CT_EWK_TERNARY, CT_EWK_WHERE };

/* The loop shape of op (CT_EWK_NONE when ew_math.def has no line for it)
 * and its number of operands (0 when none). */
int ct__ew_kind(ct_op op);
int ct__ew_arity(ct_op op);
/* Whether op has an expression for kernel dtype dt (bool, u8 ... i64,
 * f32, f64), and then the dtype of its result (dt, or CT_BOOL for
 * predicates and comparisons); -1 when it has none.  For where, dt is the
 * values' dtype (the condition is always a bool byte). */
bool ct__ew_supports(ct_op op, ct_dtype dt);
int ct__ew_out_dtype(ct_op op, ct_dtype dt);
/* The expression's text as written in ew_math.def (NULL when none). */
const char *ct__ew_expr(ct_op op, ct_dtype dt);
/* The C type rendered code uses for kernel dtype dt ("float", "int64_t",
 * "uint8_t" for bool); NULL for dtypes without kernels. */
const char *ct__ew_ctype(ct_dtype dt);
/* The #include lines a program with rendered expressions starts with. */
const char *ct__ew_prelude(void);
/* The expression of op for dtype dt over operands[0 .. arity) with
 * parameters p (may be NULL for ops without parameters): malloc'ed (free
 * it), or NULL with the error set (no expression for dt, an unknown
 * parameter name in the list, out of memory). */
char *ct__ew_render(ct_op op, ct_dtype dt, const char *const *operands, const ct_p_ew *p);
/* The same expression with each parameter ew.<field> written as the
 * identifier <prefix><field> instead of its value ("P_alpha"), which the
 * program defines with the field's C type (double for F64, int64_t for
 * I64, int for BOOL): one text for every parameter value, so a backend
 * compiles it once per (op, dtype) and passes the values at run time (the
 * OpenCL device).  malloc'ed, or NULL with the error set. */
char *ct__ew_render_named(ct_op op, ct_dtype dt, const char *const *operands, const char *prefix);
/* v as a C literal of type double that reads back exactly (%a, INFINITY,
 * NAN); returns snprintf's count. */
int ct__ew_literal_f64(char *buf, size_t n, double v);

#endif
