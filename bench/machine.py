"""The machine a result was measured on, and the name its result files carry.

Every current result is bench/results/current/<benchmark>_<machine>.<ext>. The machine is the
device whose speed the numbers measure: for a GPU result the GPU's model ("NVIDIA H200" ->
h200), for a CPU result the CPU's family and its logical CPUs ("Intel(R) Xeon(R) Processor"
with 2 -> xeon-2c). Only the standard library is used, so device scripts can ask for the name:

    python3 bench/machine.py [--gpu]      prints this machine's name (--gpu: the GPU's)
"""
import os
import re
import subprocess
import sys

BENCH = os.path.dirname(os.path.abspath(__file__))
CURRENT = os.path.join(BENCH, "results", "current")

# Words that name a vendor, a trademark or a product class rather than the model.
_NOISE = {"intel", "amd", "nvidia", "geforce", "tesla", "r", "tm", "cpu", "processor", "gpu"}


def read_cpuinfo():
    """(model name of the first CPU or None, flags of the first CPU in file order); (None, [])
    where /proc/cpuinfo cannot be read."""
    model, flags = None, []
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name") and model is None:
                    model = line.split(":", 1)[1].strip()
                elif line.startswith("flags") and not flags:
                    flags = line.split(":", 1)[1].split()
                if model is not None and flags:
                    break
    except OSError:
        pass
    return model, flags


def nvidia_smi(fields):
    """The first GPU's values of nvidia-smi's query fields (e.g. ["name", "driver_version"]), or
    None without a GPU."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=" + ",".join(fields),
                              "--format=csv,noheader"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = out.stdout.strip().splitlines()
    if out.returncode != 0 or not lines:
        return None
    return [v.strip() for v in lines[0].split(",")]


def gpu_model():
    """The first GPU's name as nvidia-smi gives it, or None without a GPU."""
    values = nvidia_smi(["name"])
    return values[0] if values else None


def _model_words(text):
    """Lowercase words of a model name without vendor words, clock ("@ 2.10GHz") or core count
    ("64-Core")."""
    text = re.sub(r"@.*$", "", text.lower())
    text = re.sub(r"\b\d+-core\b", "", text)
    return [w for w in re.split(r"[^a-z0-9]+", text) if w and w not in _NOISE]


def gpu_name(model):
    """h200 for "NVIDIA H200", h100 for "NVIDIA H100 80GB HBM3", rtx-4090 for "NVIDIA GeForce
    RTX 4090": the first model word, and the next one when the first has no digit."""
    words = _model_words(model) or ["gpu"]
    if not re.search(r"\d", words[0]) and len(words) > 1:
        return "-".join(words[:2])
    return words[0]


def cpu_name(model, cores):
    """xeon-2c for "Intel(R) Xeon(R) Processor" on 2 logical CPUs, epyc-7763-128c for "AMD EPYC
    7763 64-Core Processor" on 128: the family, its model number when the name has one, and the
    logical CPUs (the count the benchmarks' thread counts refer to)."""
    words = _model_words(model or "") or ["cpu"]
    name = words[:2] if len(words) > 1 and re.search(r"\d", words[1]) else words[:1]
    return "%s-%dc" % ("-".join(name), cores)


def machine_name(gpu=False):
    """This machine's name: its GPU's with gpu=True (None without a GPU), else its CPU's."""
    if gpu:
        model = gpu_model()
        return gpu_name(model) if model else None
    return cpu_name(read_cpuinfo()[0], os.cpu_count() or 1)


def current_base(benchmark, machine):
    """bench/results/current/<benchmark>_<machine>, without an extension."""
    return os.path.join(CURRENT, "%s_%s" % (benchmark, machine))


def main():
    name = machine_name(gpu="--gpu" in sys.argv[1:])
    if not name:
        sys.exit("machine.py: no GPU (nvidia-smi found none)")
    print(name)


if __name__ == "__main__":
    main()
