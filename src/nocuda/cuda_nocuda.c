/* pc/cuda.h in a build without CUDA (PC_CUDA=OFF). Not compiled when CUDA is on. */
#include "base/fail.h"
#include "pc/cuda.h"

static pc_status no_cuda(void) {
    return pc_fail(PC_ERR_UNSUPPORTED, "this build of pcinfer has no CUDA support (PC_CUDA=OFF)");
}

int pc_cuda_available(void) { return 0; }
int pc_cuda_device_count(void) { return 0; }
pc_status pc_cuda_set_device(int index) { (void)index; return no_cuda(); }

pc_status pc_cuda_malloc(void **d_ptr, size_t bytes) { (void)d_ptr, (void)bytes; return no_cuda(); }
void pc_cuda_free(void *d_ptr) { (void)d_ptr; }
pc_status pc_cuda_memcpy_h2d(void *d_dst, const void *src, size_t bytes) { (void)d_dst, (void)src, (void)bytes; return no_cuda(); }
pc_status pc_cuda_memcpy_d2h(void *dst, const void *d_src, size_t bytes) { (void)dst, (void)d_src, (void)bytes; return no_cuda(); }
pc_status pc_cuda_memset(void *d_ptr, int byte, size_t bytes) { (void)d_ptr, (void)byte, (void)bytes; return no_cuda(); }
pc_status pc_cuda_synchronize(void) { return no_cuda(); }
pc_status pc_cuda_describe(char *text, size_t len) { (void)text, (void)len; return no_cuda(); }
pc_status pc_cuda_timer_create(pc_cuda_timer **timer) { (void)timer; return no_cuda(); }
pc_status pc_cuda_timer_start(pc_cuda_timer *timer, pc_stream stream) { (void)timer, (void)stream; return no_cuda(); }
pc_status pc_cuda_timer_stop(pc_cuda_timer *timer, pc_stream stream) { (void)timer, (void)stream; return no_cuda(); }
pc_status pc_cuda_timer_elapsed_ms(pc_cuda_timer *timer, float *ms) { (void)timer, (void)ms; return no_cuda(); }
void pc_cuda_timer_free(pc_cuda_timer *timer) { (void)timer; }
