/* The version of pcinfer: the one place it is written. CMake reads these lines for the project
 * version and the shared library's SOVERSION (major.minor: a release that changes the ABI raises
 * the minor number while the major is 0), and the library reports the version it was built as.
 *
 * A program can compare the header it was compiled with against the library it runs with:
 *     if (pc_version_number() != PC_VERSION_NUMBER) ... (a different libpcinfer was loaded)
 */
#ifndef PC_VERSION_H
#define PC_VERSION_H

#include "pc/export.h"

#define PC_VERSION_MAJOR 0
#define PC_VERSION_MINOR 3
#define PC_VERSION_PATCH 0
#define PC_VERSION_STRING "0.3.0"

/* major * 10000 + minor * 100 + patch, e.g. 300 for 0.3.0: ordered like the versions. */
#define PC_VERSION_NUMBER (PC_VERSION_MAJOR * 10000 + PC_VERSION_MINOR * 100 + PC_VERSION_PATCH)

#ifdef __cplusplus
extern "C" {
#endif

/* The library's version as "major.minor.patch" (PC_VERSION_STRING of its build); static text,
 * never NULL. */
PC_API const char *pc_version(void);

/* The library's PC_VERSION_NUMBER. */
PC_API int pc_version_number(void);

#ifdef __cplusplus
}
#endif

#endif
