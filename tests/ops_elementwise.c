/* ops_elementwise.c -- fixture runners for the elementwise family (tests/fixtures/elementwise.txt). */
#include "fixture.h"

const fx_op fx_ops_elementwise[] = {{"", NULL, 0, 0}};
const int fx_nops_elementwise = 0;
