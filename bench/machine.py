"""The CPU model name and feature flags from /proc/cpuinfo, for the machine description that
every benchmark result carries (each script picks the flags it reports)."""


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
