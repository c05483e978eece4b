/* grad_reduce.c -- gradcheck cases for the reduce family. */
#include "gradcheck_harness.h"

const gc_case gc_cases_reduce[] = {{"", "", 0, 0, {0}, {{0}}, 0, 0, 0, 0, 0}};
const int gc_ncases_reduce = 0;
