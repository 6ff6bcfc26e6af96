// Force-included in sanitizer builds (ASan unit tests, fuzzers).
//
// LLVM's BumpPtrAllocator poisons the unused part of its slabs when the including code is built with
// AddressSanitizer. Debian's libLLVM/libMLIR are not instrumented, so the same allocators are also
// used by uninstrumented code that never unpoisons what it hands out: MLIR storage allocated inside
// libMLIR then lands in memory our instrumented templates poisoned, and the next intercepted memcmp
// over it reports a false use-after-poison. Turning the annotations off in our code keeps LLVM's
// allocators consistent; ASan still checks every heap, stack and global access of ours.
#pragma once
#if defined(__has_include)
#if __has_include(<sanitizer/asan_interface.h>)
#include <sanitizer/asan_interface.h>
#define __asan_poison_memory_region(p, size) ((void)(p), (void)(size))
#define __asan_unpoison_memory_region(p, size) ((void)(p), (void)(size))
#endif
#endif
