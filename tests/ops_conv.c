/* ops_conv.c -- fixture runners for the conv family (tests/fixtures/conv.txt). */
#include "fixture.h"

const fx_op fx_ops_conv[] = {{"", NULL, 0, 0}};
const int fx_nops_conv = 0;
