/* grad_index.c -- gradcheck cases for the index family. */
#include "gradcheck_harness.h"

const gc_case gc_cases_index[] = {{"", "", 0, 0, {0}, {{0}}, 0, 0, 0, 0, 0}};
const int gc_ncases_index = 0;
