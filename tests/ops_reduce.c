/* ops_reduce.c -- fixture runners for the reduce family (tests/fixtures/reduce.txt). */
#include "fixture.h"

const fx_op fx_ops_reduce[] = {{"", NULL, 0, 0}};
const int fx_nops_reduce = 0;
