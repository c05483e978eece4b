/* grad_linalg.c -- gradcheck cases for the linalg family. */
#include "gradcheck_harness.h"

const gc_case gc_cases_linalg[] = {{"", "", 0, 0, {0}, {{0}}, 0, 0, 0, 0, 0}};
const int gc_ncases_linalg = 0;
