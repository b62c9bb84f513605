/* Names of kernels, dtypes and instruction sets as the tools spell them. */
#include <string.h>

#include "base/fail.h"
#include "pc/lse.h"

static const char *const kernel_names[] = {"ref", "fuse", "int"};
static const char *const dtype_names[] = {"f32", "f16", "bf16", "q10.6"};
static const char *const isa_names[] = {"auto", "scalar", "avx2", "avx512"};

#define PC_COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

static const char *name_of(const char *const *names, int count, int value) {
    return value >= 0 && value < count ? names[value] : "unknown";
}

static int index_of(const char *const *names, int count, const char *name) {
    for (int i = 0; name && i < count; i++)
        if (strcmp(names[i], name) == 0) return i;
    return -1;
}

const char *pc_lse_kernel_name(pc_lse_kernel k) {
    return name_of(kernel_names, PC_COUNT(kernel_names), (int)k);
}
const char *pc_dtype_name(pc_dtype d) {
    return name_of(dtype_names, PC_COUNT(dtype_names), (int)d);
}
const char *pc_isa_name(pc_isa i) { return name_of(isa_names, PC_COUNT(isa_names), (int)i); }

size_t pc_dtype_size(pc_dtype d) { return d == PC_F32 ? 4 : 2; }

pc_status pc_lse_kernel_parse(const char *name, pc_lse_kernel *k) {
    int i = index_of(kernel_names, PC_COUNT(kernel_names), name);
    if (i < 0 || !k)
        return pc_fail(PC_ERR_ARG, "unknown LSE kernel '%s' (ref, fuse, int)",
                       name ? name : "(null)");
    *k = (pc_lse_kernel)i;
    return PC_OK;
}

pc_status pc_dtype_parse(const char *name, pc_dtype *d) {
    int i = index_of(dtype_names, PC_COUNT(dtype_names), name);
    if (i < 0 || !d)
        return pc_fail(PC_ERR_ARG, "unknown dtype '%s' (f32, f16, bf16, q10.6)",
                       name ? name : "(null)");
    *d = (pc_dtype)i;
    return PC_OK;
}

pc_status pc_isa_parse(const char *name, pc_isa *isa) {
    int i = index_of(isa_names, PC_COUNT(isa_names), name);
    if (i < 0 || !isa)
        return pc_fail(PC_ERR_ARG, "unknown instruction set '%s' (auto, scalar, avx2, avx512)",
                       name ? name : "(null)");
    *isa = (pc_isa)i;
    return PC_OK;
}
