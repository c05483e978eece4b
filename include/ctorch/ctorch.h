/* ctorch.h -- umbrella header: #include <ctorch/ctorch.h> */
#ifndef CTORCH_H
#define CTORCH_H
#define CTORCH_VERSION_MAJOR 0
#define CTORCH_VERSION_MINOR 1
#define CTORCH_VERSION_PATCH 0
#include "error.h"
#include "tensor.h"
#include "memory.h"
#include "cuda.h"
#include "ops.h"
#include "autograd.h"
#include "data.h"
#include "nn.h"
#include "io.h"
#include "optim.h"
#include "amp.h"
#include "models.h"
#include "text.h"
#include "profiler.h"
#include "compile.h"
#include "func.h"
#endif
