"""The output check's criteria: a per-row cosine, an elementwise bound
|d - r| <= atol + rtol * |r| and a bound on the tensor's norm ratio (a scale
error leaves every cosine at 1), per reference mode ("device": the
reference computes as the device does; "fp32": FP32 from the unquantized
values) and output dtype.  The defaults come from the noise floor that
`ipu-e2e-bench noise` measures over 51 correct plans: the worst figure over
every plan times the factor in MARGINS, and never tighter than MARGINS's
allowance (room for a BLAS whose kernels sum in another order on another
CPU: a few FP16 ulps), rounded outwards.  Its last run here: the
device-precision reference (attention in the plan's mode, matmuls in the
plan's blocks and split sums) is bit-exact for all 51 plans, outputs and
all 1,242 op outputs; fp32/f16 worst cosine 0.986318, atol 0.198, norm 1 +-
0.0261.  `--min-cosine`, `--atol`, `--rtol` and `--norm-tolerance` override the output
defaults.
"""

# Per (reference mode, output dtype): the defaults.
DEFAULTS = {
    ("device", "f16"): {"min_cosine": 0.9999, "atol": 0.02, "rtol": 2 ** -7, "norm_tolerance": 0.002},
    ("device", "f32"): {"min_cosine": 0.9999, "atol": 0.02, "rtol": 2 ** -7, "norm_tolerance": 0.002},
    ("fp32", "f16"): {"min_cosine": 0.97, "atol": 0.4, "rtol": 0.125, "norm_tolerance": 0.06},
    ("fp32", "f32"): {"min_cosine": 0.97, "atol": 0.4, "rtol": 0.125, "norm_tolerance": 0.06},
}
# How the defaults sit against the measured floor: the cosine threshold is
# (1 - floor) * cosine_gap_factor below 1, atol and the norm tolerance are the
# worst measured figure times their factor; none tighter than the allowance.
MARGINS = {"cosine_gap_factor": 2.0, "atol_factor": 2.0, "norm_factor": 2.0,
           "cosine_gap_allowance": 1e-4, "atol_allowance": 0.02, "norm_allowance": 0.002}


def criteria(mode, dtype, min_cosine=None, atol=None, rtol=None, norm_tolerance=None):
    """The criteria for an output: the defaults of (mode, dtype), each
    overridden when given."""
    chosen = dict(DEFAULTS.get((mode, dtype), DEFAULTS[(mode, "f32")]))
    for key, value in (("min_cosine", min_cosine), ("atol", atol), ("rtol", rtol),
                       ("norm_tolerance", norm_tolerance)):
        if value is not None:
            chosen[key] = value
    return chosen


def help_text():
    """The defaults as --help states them."""
    return "; ".join(f"{mode} reference, {dtype} output: cosine >= {c['min_cosine']}, atol {c['atol']:g}, "
                     f"rtol {c['rtol']:g}, norm ratio 1 +- {c['norm_tolerance']:g}"
                     for (mode, dtype), c in DEFAULTS.items())


# The per-op check (--check-ops): each op's device output against the
# device-precision reference of that op alone, from the device's own inputs;
# atol_rms is the absolute part as a fraction of the reference output's RMS.
# Exact: the reference computes each op as the device does, with the same
# library on the same CPU, and the measured floor is zero (every op output of
# the noise floor's 51 plans and of the random workloads is bit exact), so an
# op's output that differs at all is a wrong op, however small the
# difference (a LayerNorm epsilon of 1e-3 for 1e-6 moves single FP16 ulps
# per op and fails the final output only after the layers compound it).
OP_DEFAULTS = {"min_cosine": 0.9999, "atol_rms": 0.0, "rtol": 0.0, "norm_tolerance": 0.002}


def op_criteria():
    return dict(OP_DEFAULTS)


def op_help_text():
    c = OP_DEFAULTS
    bound = "d = r exactly" if c["atol_rms"] == 0 and c["rtol"] == 0 else \
        f"|d - r| <= {c['atol_rms']} x RMS(r) + {c['rtol']:g} |r|"
    return f"{bound}, cosine >= {c['min_cosine']}, norm ratio 1 +- {c['norm_tolerance']}"
