/* derivs_linalg.c -- derivatives of the linalg family. */
#include "autograd_impl.h"

void ct__vjp_register_linalg(void) {}
