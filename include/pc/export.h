/* PC_API marks the functions libpcinfer exports. The library is built with hidden visibility
 * (CMake's C_VISIBILITY_PRESET), so everything else, internal helpers included, stays inside
 * it; a static build exports nothing and PC_API only documents the public surface. */
#ifndef PC_EXPORT_H
#define PC_EXPORT_H

#if defined(__GNUC__) || defined(__clang__)
#define PC_API __attribute__((visibility("default")))
#else
#define PC_API
#endif

#endif
