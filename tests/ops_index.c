/* ops_index.c -- fixture runners for the index family (tests/fixtures/index.txt). */
#include "fixture.h"

const fx_op fx_ops_index[] = {{"", NULL, 0, 0}};
const int fx_nops_index = 0;
