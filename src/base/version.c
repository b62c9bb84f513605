#include "pc/version.h"

const char *pc_version(void) { return PC_VERSION_STRING; }

int pc_version_number(void) { return PC_VERSION_NUMBER; }
