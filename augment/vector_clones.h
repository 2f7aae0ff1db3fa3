/* VECTOR_CLONES: hot loops get an AVX2 clone next to the baseline build, picked at load time (GCC/clang ifunc),
 * so one wheel runs on any x86-64 and vectorises wide where the CPU can. Empty elsewhere. */
#ifndef DATAIO_VECTOR_CLONES_H
#define DATAIO_VECTOR_CLONES_H

#if defined(__x86_64__) && defined(__has_attribute)
#if __has_attribute(target_clones)
#define VECTOR_CLONES __attribute__((target_clones("avx2", "default")))
#endif
#endif
#ifndef VECTOR_CLONES
#define VECTOR_CLONES
#endif

#endif
