/* derivs_conv.c -- derivatives of the conv family. */
#include "autograd_impl.h"

void ct__vjp_register_conv(void) {}
