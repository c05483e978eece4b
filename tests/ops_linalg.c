/* ops_linalg.c -- fixture runners for the linalg family (tests/fixtures/linalg.txt). */
#include "fixture.h"

const fx_op fx_ops_linalg[] = {{"", NULL, 0, 0}};
const int fx_nops_linalg = 0;
