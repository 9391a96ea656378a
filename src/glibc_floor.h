/* The plugin jar's copy of this library must load on the C libraries of the
 * distributions Spark runs on: glibc 2.17 and later (README, "Spark plugin").
 * glibc 2.34 moved the thread calls into libc under new symbol versions and
 * keeps the first ones for programs built before: on x86-64 the calls below
 * are bound to those, which every glibc since 2.17 exports. fileio.c takes
 * the calls that later glibc versions added or renamed (getrandom,
 * copy_file_range, stat, fstat) to the kernel directly. Not under the
 * sanitizers, whose run-time libraries intercept these calls by name. */
#ifndef MTS_GLIBC_FLOOR_H
#define MTS_GLIBC_FLOOR_H

#include <pthread.h>

#if defined(__GLIBC__) && defined(__x86_64__) && !defined(MTS_SANITIZED)
__asm__(".symver pthread_create,pthread_create@GLIBC_2.2.5");
__asm__(".symver pthread_join,pthread_join@GLIBC_2.2.5");
__asm__(".symver pthread_once,pthread_once@GLIBC_2.2.5");
__asm__(".symver pthread_setname_np,pthread_setname_np@GLIBC_2.12");
#endif

#endif
