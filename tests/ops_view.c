/* ops_view.c -- fixture runners for the view family (tests/fixtures/view.txt). */
#include "fixture.h"

const fx_op fx_ops_view[] = {{"", NULL, 0, 0}};
const int fx_nops_view = 0;
