// SPDX-License-Identifier: GPL-2.0
/*
 * remu_trace.c - instantiates remu's tracepoints (remu_trace.h, system
 * "remu"; docs/tracing.md).  Owns nothing else and takes no lock.
 */
#define CREATE_TRACE_POINTS
#include "remu_trace.h"
