/* demo.c -- placeholder until the ops it needs land (see /tmp/demo.c) */
#include <ctorch/ctorch.h>
int main(void) { return 0; }
