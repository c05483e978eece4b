/* grad_conv.c -- gradcheck cases for the conv family. */
#include "gradcheck_harness.h"

const gc_case gc_cases_conv[] = {{"", "", 0, 0, {0}, {{0}}, 0, 0, 0, 0, 0}};
const int gc_ncases_conv = 0;
