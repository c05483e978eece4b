/* grad_elementwise.c -- gradcheck cases for the elementwise family. */
#include "gradcheck_harness.h"

const gc_case gc_cases_elementwise[] = {{"", "", 0, 0, {0}, {{0}}, 0, 0, 0, 0, 0}};
const int gc_ncases_elementwise = 0;
