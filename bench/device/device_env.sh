# shellcheck shell=sh
# Sourced by the scripts that run on the GPU machine (bench/device/*.sh and
# bench/paper/paper_gpu_run.sh, from the repository root): unpacks the carried cmocka packages
# (.device-deps/*.deb) into /tmp/deps and points pkg-config, the compiler and the loader at
# them, puts nvcc on PATH, and copies the carried MNIST files (.devdata/mnist) to where the
# tools look for them.
# Debian's cmocka.pc names /usr/include and /usr/lib directly (no ${prefix}): rewrite those.
if ls .device-deps/*.deb >/dev/null 2>&1; then
    for f in .device-deps/*.deb; do dpkg -x "$f" /tmp/deps; done
    sed -i 's#-I/usr/include#-I/tmp/deps/usr/include#; s#-L/usr/lib#-L/tmp/deps/usr/lib#' \
        /tmp/deps/usr/lib/x86_64-linux-gnu/pkgconfig/cmocka.pc
    export PKG_CONFIG_PATH=/tmp/deps/usr/lib/x86_64-linux-gnu/pkgconfig
    export CPATH=/tmp/deps/usr/include LIBRARY_PATH=/tmp/deps/usr/lib/x86_64-linux-gnu
    export LD_LIBRARY_PATH=/tmp/deps/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi
export PATH=$PATH:/usr/local/cuda/bin
if [ -d .devdata/mnist ]; then mkdir -p datasets/mnist && cp -n .devdata/mnist/* datasets/mnist/; fi
